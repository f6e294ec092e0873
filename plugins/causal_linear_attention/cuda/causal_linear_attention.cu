// Causal linear attention on the linear recurrence's kernels (linear_recurrence/cuda/linear_recurrence.h): the
// linear rule with scale 1 on phi(q), phi(k) (the feature map elu + 1) and v, with the normaliser z, so
// out = phi(q)^T S / (phi(q)^T z + eps). No kernel of its own.
#include "causal_linear_attention/cuda/causal_linear_attention.h"
#include "linear_recurrence/cuda/linear_recurrence.h"

namespace rnnx
{
namespace kernels
{
namespace
{

//! The linear recurrence that is this attention: H_q = H_kv = heads, scale 1, phi on query and key.
LinearRecurrenceParams asRecurrence(const LinearAttentionParams& p)
{
    LinearRecurrenceParams r{};
    r.batch = p.batch;
    r.length = p.length;
    r.q_heads = p.heads;
    r.kv_heads = p.heads;
    r.dim_k = p.dim_k;
    r.dim_v = p.dim_v;
    r.rule = LinearRecurrenceRule::kLINEAR;
    r.scale = 1.f;
    r.mask_type = p.mask_type;
    r.feature_map = LinearRecurrenceFeatureMap::kELU_PLUS_ONE;
    r.time_major = p.time_major;
    return r;
}

} // namespace

size_t causalLinearAttentionWorkspaceSize(const LinearAttentionParams& params, DataType type)
{
    return linearRecurrenceWorkspaceSize(asRecurrence(params), type, true);
}

cudaError_t causalLinearAttentionForward(const LinearAttentionParams& params, DataType type, const void* q,
    const void* k, const void* v, const float* S0, const float* z0, const void* mask_pad, void* out, float* S_last,
    float* z_last, void* workspace, cudaStream_t stream)
{
    const LinearRecurrenceNormaliser normaliser{z0, z_last, params.eps, workspace};
    return linearRecurrenceForward(
        asRecurrence(params), type, q, k, v, S0, nullptr, nullptr, mask_pad, out, S_last, stream, &normaliser);
}

} // namespace kernels
} // namespace rnnx
