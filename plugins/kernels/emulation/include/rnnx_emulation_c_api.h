// What the C entry points of librnnx_kernels_emulated.so share (src/c_api.cpp, and each op's
// plugins/<op>/cuda/<op>_emulation.cpp, compiled into that library only): the export macro and the dtype codes.
// Every op entry point returns its launcher's cudaError_t as an int (0 = cudaSuccess); after a failure,
// rnnx_emu_take_error_message() says what the emulation found.
#pragma once

#include "rnnx/kernel_types.h"

//! Marks a C entry point exported by the library (the others are hidden; exports.map keeps rnnx_emu_*).
#define RNNX_EMU_API extern "C" __attribute__((visibility("default")))

namespace rnnx
{
namespace emu
{

//! The dtype code of the C API (0 = fp32, 1 = fp16, 2 = bf16) as a DataType; false for any other code.
inline bool toDataType(int code, rnnx::kernels::DataType* type)
{
    switch (code)
    {
    case 0: *type = rnnx::kernels::DataType::kFLOAT; return true;
    case 1: *type = rnnx::kernels::DataType::kHALF; return true;
    case 2: *type = rnnx::kernels::DataType::kBF16; return true;
    default: return false;
    }
}

} // namespace emu
} // namespace rnnx
