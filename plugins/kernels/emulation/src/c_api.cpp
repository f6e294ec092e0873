// The op-agnostic C entry points of librnnx_kernels_emulated.so for tests driving the kernels from Python (ctypes)
// on host memory: the schedule, the counters and the last failure's message. Each op's entry points (its
// launchers with plain arguments) are in its folder, plugins/<op>/cuda/<op>_emulation.cpp, compiled into this
// library by the glob of ../CMakeLists.txt; include/rnnx_emulation_c_api.h has what they share.
#include <cstdint>
#include <cstring>
#include <string>

#include "rnnx_cuda_emulation.h"
#include "rnnx_emulation_c_api.h"

//! schedule: 0 = in order, 1 = reversed, 2 = random (seeded).
RNNX_EMU_API void rnnx_emu_set_schedule(int schedule, uint64_t seed)
{
    rnnx::emu::setSchedule(static_cast<rnnx::emu::Schedule>(schedule), seed);
}

//! Writes the counters (rnnx::emu::Stats, in field order) into out[0..7].
RNNX_EMU_API void rnnx_emu_stats(uint64_t* out)
{
    const rnnx::emu::Stats s = rnnx::emu::stats();
    const uint64_t values[] = {s.launches, s.blocks, s.threads, s.block_barriers, s.warp_collectives, s.mma,
        s.max_shared_bytes, s.attribute_calls};
    std::memcpy(out, values, sizeof(values));
}

RNNX_EMU_API void rnnx_emu_reset_stats()
{
    rnnx::emu::resetStats();
}

RNNX_EMU_API void rnnx_emu_forget_function_attributes()
{
    rnnx::emu::forgetFunctionAttributes();
}

//! Copies the last failure's message into buffer (at most size bytes, NUL-terminated) and clears it.
RNNX_EMU_API void rnnx_emu_take_error_message(char* buffer, size_t size)
{
    const std::string message = rnnx::emu::takeLaunchErrorMessage();
    if (size == 0)
        return;
    std::strncpy(buffer, message.c_str(), size - 1);
    buffer[size - 1] = '\0';
}
