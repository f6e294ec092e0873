// Shared between the emulated device (scheduler) and the emulated CUDA runtime functions.
#pragma once

#include <cuda_runtime_api.h>

namespace rnnx
{
namespace emu
{

//! The error of the last failed launch or runtime call (cudaGetLastError), reset to cudaSuccess by take.
cudaError_t takeLastError();
cudaError_t peekLastError();
void setLastError(cudaError_t error);

//! Whether `stream` is the default stream (nullptr) or a stream created and not yet destroyed.
bool isValidStream(cudaStream_t stream);

//! Largest dynamic shared memory a kernel may opt in to (sm_86 / sm_89: 99 KiB, the smallest of the
//! architectures the rnnx kernels are built for) and the default without opting in.
constexpr int kMaxSharedOptIn = 99 * 1024;
constexpr int kDefaultShared = 48 * 1024;

} // namespace emu
} // namespace rnnx
