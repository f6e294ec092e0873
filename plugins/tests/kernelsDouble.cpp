#include "kernelsDouble.h"

namespace rnnx
{
namespace test
{

KernelsDouble& kernelsDouble()
{
    static KernelsDouble state;
    return state;
}

void resetKernelsDouble()
{
    KernelsDouble& state = kernelsDouble();
    uint64_t const generation = state.generation + 1;
    state = KernelsDouble{};
    state.generation = generation;
}

} // namespace test
} // namespace rnnx
