// PyTorch binding of the rnnx CUDA kernels: thin wrappers that pass tensors to each op's launchers
// (plugins/<op>/cuda/<op>.h, the same launchers the TensorRT plugins call).
//
// Each op's wrappers are in its folder, plugins/<op>/torch/<op>_binding.cpp, registered with RNNX_TORCH_BINDING
// (binding_support.h, with the checks they share); rnnx.models.ops.cuda compiles this file with every one of them
// and every op's kernels, so a new op joins without an edit here. This file only makes the module: each op's
// functions added in the order of the op names.
#include "binding_support.h"

#include <algorithm>

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    auto bindings = rnnx::torch_binding::registeredBindings();
    std::sort(bindings.begin(), bindings.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const auto twice = std::adjacent_find(
        bindings.begin(), bindings.end(), [](const auto& a, const auto& b) { return a.first == b.first; });
    TORCH_CHECK(twice == bindings.end(), "rnnx CUDA kernels: two bindings registered as ", twice->first);
    for (const auto& [name, bind] : bindings)
        bind(m);
}
