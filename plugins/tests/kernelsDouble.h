/*
 * Test double of the CUDA kernels' launch API (plugins/kernels/include/rnnx/kernels.h): records the arguments
 * of the last call and returns a chosen status, so enqueue can be checked on a machine without a GPU.
 */
#pragma once

#include "rnnx/kernels.h"

namespace rnnx
{
namespace test
{

struct SruScanCall
{
    int32_t count{0};
    kernels::SruScanParams params{};
    kernels::DataType type{};
    void const* U{};
    void const* x{};
    void const* weightC{};
    void const* bias{};
    float const* c0{};
    void const* maskPad{};
    void* h{};
    float* cLast{};
    cudaStream_t stream{};
};

struct AttentionCall
{
    int32_t count{0};
    kernels::LinearAttentionParams params{};
    kernels::DataType type{};
    void const* q{};
    void const* k{};
    void const* v{};
    float const* S0{};
    float const* z0{};
    void const* maskPad{};
    void* out{};
    float* SLast{};
    float* zLast{};
    void* workspace{};
    cudaStream_t stream{};
};

struct LinearRecurrenceCall
{
    int32_t count{0};
    kernels::LinearRecurrenceParams params{};
    kernels::DataType type{};
    void const* query{};
    void const* key{};
    void const* value{};
    float const* pastState{};
    void const* decay{};
    void const* beta{};
    void const* maskPad{};
    void* output{};
    float* presentState{};
    cudaStream_t stream{};
};

struct CausalConvCall
{
    int32_t count{0};
    kernels::CausalConvParams params{};
    kernels::DataType type{};
    void const* input{};
    void const* weight{};
    void const* bias{};
    float const* pastState{};
    void const* maskPad{};
    void* output{};
    float* presentState{};
    cudaStream_t stream{};
};

struct KernelsDouble
{
    SruScanCall sru;
    AttentionCall attention;
    LinearRecurrenceCall recurrence;
    CausalConvCall conv;
    cudaError_t status{cudaSuccess};
    size_t workspaceSize{4096};
};

//! The double's state; reset between test cases.
KernelsDouble& kernelsDouble();

} // namespace test
} // namespace rnnx
