// rnnx::LinearRecurrence on the CPU execution provider, fp32, fp16, bf16 and fp64 I/O (fp32 state; fp64 for fp64).
//
// Inputs by position: query (B, T, Hq*dk), key (B, T, Hk*dk), value (B, T, Hkv*dv), past_state? (B, Hkv, dk, dv),
// decay? (B, T, Hkv) or (B, T, Hkv*dk), beta? (B, T, Hkv) or (B, T, 1), mask_pad? (B, T); outputs output
// (B, T, Ho*dv), present_state (B, Hkv, dk, dv), with Hk = min(Hq, Hkv) and Ho = max(Hq, Hkv) (one a multiple of the
// other: grouped query or grouped value); attributes q_num_heads, kv_num_heads, update_rule, scale, qk_l2_norm
// (rnnx.runtime.contract.ops.LINEAR_RECURRENCE; qk_l2_norm absent is 0). An absent optional input may be an empty
// name or left out at the end; an absent or empty past_state is zeros, an absent or empty mask no pads. decay is
// required by the gated rules and beta by the delta rules; another rule ignores one (the TensorRT layout's
// placeholders). fp16 / bf16 inputs are staged to fp32 around the fp32 kernel (linear_recurrence_isa.h), parallel over
// (batch, kv head, tile of value columns) on ORT's intra-op thread pool.
#pragma once

#include "linear_recurrence_isa.h"
#include "ort_op_support.h"

#include <algorithm>
#include <cmath>

namespace rnnx_ort
{
// LinearRecurrence for activation type T: query, key, value, decay?, beta?, output in T; past_state?, present_state
// in acc_type<T>; mask_pad? any of mask_bytes()' types.
template <typename T> struct LinearRecurrenceKernel
{
    //! New in rnnx domain version 2 (heads packed, as the standard's LinearAttention).
    static constexpr OpSignature<7, 2> signature{"LinearRecurrence", 2,
        {{{Role::activation, false}, {Role::activation, false}, {Role::activation, false}, {Role::state, true},
            {Role::activation, true}, {Role::activation, true}, {Role::mask, true}}},
        {{Role::activation, Role::state}}};
    //! update_rule values, in the order of LinearRecurrenceArgs::rule.
    static constexpr std::array<const char*, 4> rules{{"linear", "gated", "delta", "gated_delta"}};

    int64_t q_num_heads, kv_num_heads;
    std::string update_rule;
    int64_t rule = -1; // index in `rules`; -1 for another update_rule
    float scale;
    int64_t qk_l2_norm; // 0 or 1

    explicit LinearRecurrenceKernel(const OrtKernelInfo* info)
        : q_num_heads(attribute_or<int64_t>(info, "q_num_heads", 0))
        , kv_num_heads(attribute_or<int64_t>(info, "kv_num_heads", 0))
        , update_rule(attribute_or<std::string>(info, "update_rule", "gated_delta"))
        , scale(attribute_or<float>(info, "scale", 0.0f))
        , qk_l2_norm(attribute_or<int64_t>(info, "qk_l2_norm", 0))
    {
        for (size_t i = 0; i < rules.size(); ++i)
            if (update_rule == rules[i])
                rule = static_cast<int64_t>(i);
    }

    OrtStatusPtr compute(Ort::KernelContext ctx) const
    {
        const Ort::ConstValue q = optional_input(ctx, 0), k = optional_input(ctx, 1), v = optional_input(ctx, 2),
                              S0 = optional_input(ctx, 3), decay = optional_input(ctx, 4),
                              beta = optional_input(ctx, 5), mask = optional_input(ctx, 6);
        if (q == nullptr || k == nullptr || v == nullptr)
            return invalid(signature.name, "query, key and value are required");
        if (rule < 0)
            return invalid(
                signature.name, "update_rule must be linear, gated, delta or gated_delta, got '" + update_rule + "'");
        if (q_num_heads <= 0 || kv_num_heads <= 0
            || (q_num_heads % kv_num_heads != 0 && kv_num_heads % q_num_heads != 0))
            return invalid(signature.name,
                "q_num_heads and kv_num_heads must be positive with one a multiple of the other, got "
                    + std::to_string(q_num_heads) + " / " + std::to_string(kv_num_heads));
        if (qk_l2_norm != 0 && qk_l2_norm != 1)
            return invalid(signature.name, "qk_l2_norm must be 0 or 1, got " + std::to_string(qk_l2_norm));
        const auto qs = shape_of(q), ks = shape_of(k), vs = shape_of(v);
        if (qs.size() != 3 || ks.size() != 3 || vs.size() != 3)
            return invalid(signature.name, "query, key and value must be 3-D (B, T, heads * head size)");
        if (qs[2] % q_num_heads != 0)
            return invalid(signature.name, "query's last axis must be a multiple of q_num_heads");
        const int64_t B = qs[0], Tn = qs[1], Hq = q_num_heads, Hkv = kv_num_heads, dk = qs[2] / Hq;
        const int64_t Hk = std::min(Hq, Hkv), Ho = std::max(Hq, Hkv); // key heads, output heads
        if (ks != std::vector<int64_t>{B, Tn, Hk * dk})
            return invalid(signature.name,
                "key must be (B, T, min(q_num_heads, kv_num_heads) * dk) = " + shape_text({B, Tn, Hk * dk}));
        if (vs[0] != B || vs[1] != Tn || vs[2] % Hkv != 0)
            return invalid(signature.name, "value must be (B, T, kv_num_heads * dv)");
        const int64_t dv = vs[2] / Hkv;
        const auto S0s = S0 == nullptr ? std::vector<int64_t>{} : shape_of(S0);
        int64_t S0_count = 1;
        for (const int64_t d : S0s)
            S0_count *= d;
        const bool has_S0 = S0 != nullptr && S0_count > 0; // an empty past_state is zeros
        if (has_S0 && S0s != std::vector<int64_t>{B, Hkv, dk, dv})
            return invalid(
                signature.name, "past_state must be (B, kv_num_heads, dk, dv) = " + shape_text({B, Hkv, dk, dv}));
        const bool gated = rule == 1 || rule == 3, delta = rule == 2 || rule == 3;
        // A decay given to an ungated rule, or a beta to a non-delta rule, is ignored: the TensorRT layout passes
        // every input (zeros where the rule takes none), and the file also runs here.
        bool per_key = false, beta_per_head = false;
        if (gated)
        {
            const auto ds = decay == nullptr ? std::vector<int64_t>{} : shape_of(decay);
            per_key = ds.size() == 3 && ds[2] == Hkv * dk && dk != 1;
            if (ds.size() != 3 || ds[0] != B || ds[1] != Tn || (ds[2] != Hkv && ds[2] != Hkv * dk))
                return invalid(signature.name,
                    "update_rule " + update_rule + " needs decay (B, T, kv_num_heads) or (B, T, kv_num_heads * dk) = "
                        + shape_text({B, Tn, Hkv}) + " or " + shape_text({B, Tn, Hkv * dk}));
        }
        if (delta)
        {
            const auto bs = beta == nullptr ? std::vector<int64_t>{} : shape_of(beta);
            beta_per_head = bs.size() == 3 && bs[2] == Hkv;
            if (bs.size() != 3 || bs[0] != B || bs[1] != Tn || (bs[2] != Hkv && bs[2] != 1))
                return invalid(signature.name,
                    "update_rule " + update_rule + " needs beta (B, T, kv_num_heads) or (B, T, 1) = "
                        + shape_text({B, Tn, Hkv}) + " or " + shape_text({B, Tn, 1}));
        }
        PadMask pad;
        if (OrtStatusPtr status = pad.read(signature.name, mask, {B, Tn}, "(B, T)", true))
            return status;
        std::vector<float> q_f, k_f, v_f, d_f, b_f, out_f;
        using acc_t = acc_type<T>;
        Ort::UnownedValue out = ctx.GetOutput(0, {B, Tn, Ho * dv});
        Ort::UnownedValue present = ctx.GetOutput(1, {B, Hkv, dk, dv});
        const double resolved_scale = scale != 0.0f ? static_cast<double>(scale) : 1.0 / std::sqrt(double(dk));
        const LinearRecurrenceArgs<acc_t> args{B, Tn, Hq, Hkv, dk, dv, rule, per_key, beta_per_head, resolved_scale,
            as_acc<T>(q, q_f), as_acc<T>(k, k_f), as_acc<T>(v, v_f), has_S0 ? S0.GetTensorData<acc_t>() : nullptr,
            gated ? as_acc<T>(decay, d_f) : nullptr, delta ? as_acc<T>(beta, b_f) : nullptr, pad.bytes,
            output_acc<T>(out, static_cast<size_t>(B * Tn * Ho * dv), out_f), present.GetTensorMutableData<acc_t>(),
            qk_l2_norm != 0};
        return run<T>(ctx, linear_recurrence_forward<acc_t>, args, out, out_f);
    }
};

template <typename T> using LinearRecurrenceOp = CpuOp<LinearRecurrenceKernel, T>;
} // namespace rnnx_ort
