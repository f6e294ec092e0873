// rnnx_emu_sru_scan_forward: the C entry point of librnnx_kernels_emulated.so for this op's launcher
// (sru_scan.h), for tests driving the emulated kernel from Python (ctypes) on host memory. Compiled into the
// emulation library only (plugins/kernels/emulation); rnnx_emulation_c_api.h has the conventions.
#include "sru_scan/cuda/sru_scan.h"
#include "rnnx_emulation_c_api.h"

#include <cstdint>

//! dtype: 0 = fp32, 1 = fp16, 2 = bf16. Tensors as in sru_scan.h (sruScanForward).
RNNX_EMU_API int rnnx_emu_sru_scan_forward(int length, int batch, int hidden_size, int num_directions, int num_matrices,
    int has_skip_term, int use_tanh, float scale_x, int dtype, const void* U, const void* x, const void* weight_c,
    const void* bias, const float* c0, const uint8_t* mask_pad, void* h, float* c_last)
{
    rnnx::kernels::DataType type;
    if (!rnnx::emu::toDataType(dtype, &type))
        return cudaErrorInvalidValue;
    const rnnx::kernels::SruScanParams p{length, batch, hidden_size, num_directions, num_matrices, has_skip_term != 0,
        use_tanh != 0, scale_x, rnnx::kernels::MaskType::kUINT8};
    return rnnx::kernels::sruScanForward(p, type, U, x, weight_c, bias, c0, mask_pad, h, c_last, nullptr);
}
