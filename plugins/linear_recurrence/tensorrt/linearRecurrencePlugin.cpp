#include "linearRecurrencePlugin.h"

#include "common/exprChecks.h"
#include "linear_recurrence/cuda/linear_recurrence.h"
#include "common/pluginRegistry.h"

#include <cmath>
#include <string>

namespace rnnx
{
namespace plugin
{

static_assert(
    LinearRecurrencePlugin::kSIGNATURE.nbInputs <= InputExtents::kMAX_INPUTS, "InputExtents holds every input");
namespace
{

//! "H*d = value" when d is known, else "H*d" (for the expected shapes of the messages).
std::string heads(int64_t h, char const* dim, int64_t d)
{
    std::string const product = std::to_string(h) + "*" + dim;
    return d > 0 ? product + " = " + std::to_string(h * d) : product;
}

//! Checks the seven inputs' extents (Extents in input order) against the parameters and each other; fills d_k / d_v
//! where known (else -1). False with `error` naming the first wrong tensor, what it is and what was expected.
bool checkExtents(Extents const* in, LinearRecurrenceInputs const& layout, LinearRecurrenceParameters const& params,
    int64_t& dk, int64_t& dv, std::string& error)
{
    int64_t const Hq = params.qNumHeads;
    int64_t const Hkv = params.kvNumHeads;
    int64_t const Hk = Hq < Hkv ? Hq : Hkv; // key heads
    Extents const& q = in[layout.query];
    Extents const& k = in[layout.key];
    Extents const& v = in[layout.value];
    Extents const& S = in[layout.pastState];
    Extents const& mask = in[layout.maskPad];
    dk = -1;
    dv = -1;
    auto const wrong = [&](char const* tensor, int32_t pos, Extents const& got, std::string const& expected)
    { return wrongInput(error, tensor, pos, got, expected); };
    // d_k / d_v from the first tensor that has them known; every head dim is 1..kMAX_HEAD_DIM.
    auto const headDim =
        [&](int64_t& d, int64_t value, char const* name, char const* tensor, int32_t pos, Extents const& got)
    {
        if (value > LinearRecurrencePlugin::kMAX_HEAD_DIM)
        {
            error = std::string(tensor) + " (input " + std::to_string(pos) + ") is " + got.text() + ": head dim " + name
                + " = " + std::to_string(value) + " exceeds " + std::to_string(LinearRecurrencePlugin::kMAX_HEAD_DIM)
                + ", the largest the kernels take";
            return false;
        }
        d = d > 0 ? d : value;
        return true;
    };
    std::string const bt = "(B, T, ";
    if (q.rank() != 3 || !q.mayBeMultipleOf(2, Hq))
    {
        return wrong(
            "query", layout.query, q, bt + "q_num_heads*d_k) with a last extent a multiple of " + std::to_string(Hq));
    }
    if (q.known(2) && !headDim(dk, q.value(2) / Hq, "d_k", "query", layout.query, q))
    {
        return false;
    }
    if (k.rank() != 3 || !k.mayMatch(0, q, 0) || !k.mayMatch(1, q, 1) || !k.mayBeMultipleOf(2, Hk)
        || (dk > 0 && !k.mayBe(2, Hk * dk)))
    {
        return wrong("key", layout.key, k, bt + heads(Hk, "d_k", dk) + ") with query's B, T (min(H_q, H_kv) heads)");
    }
    if (k.known(2) && !headDim(dk, k.value(2) / Hk, "d_k", "key", layout.key, k))
    {
        return false;
    }
    if (v.rank() != 3 || !v.mayMatch(0, q, 0) || !v.mayMatch(1, q, 1) || !v.mayBeMultipleOf(2, Hkv))
    {
        return wrong("value", layout.value, v, bt + std::to_string(Hkv) + "*d_v) with query's B, T");
    }
    if (v.known(2) && !headDim(dv, v.value(2) / Hkv, "d_v", "value", layout.value, v))
    {
        return false;
    }
    std::string const state = "(B, " + std::to_string(Hkv) + ", " + (dk > 0 ? std::to_string(dk) : "d_k") + ", "
        + (dv > 0 ? std::to_string(dv) : "d_v") + ") with query's B";
    if (S.rank() != 4 || !S.mayMatch(0, q, 0) || !S.mayBe(1, Hkv) || (dk > 0 && !S.mayBe(2, dk))
        || (dv > 0 && !S.mayBe(3, dv)) || !S.mayBeMultipleOf(2, 1) || !S.mayBeMultipleOf(3, 1))
    {
        return wrong("past_state", layout.pastState, S, state);
    }
    if ((S.known(2) && !headDim(dk, S.value(2), "d_k", "past_state", layout.pastState, S))
        || (S.known(3) && !headDim(dv, S.value(3), "d_v", "past_state", layout.pastState, S)))
    {
        return false;
    }
    if (layout.readsDecay)
    {
        Extents const& decay = in[layout.decay];
        bool const lastOk = !decay.known(2) || decay.value(2) == Hkv
            || (dk > 0 ? decay.value(2) == Hkv * dk : decay.value(2) % Hkv == 0);
        if (decay.rank() != 3 || !decay.mayMatch(0, q, 0) || !decay.mayMatch(1, q, 1) || !lastOk)
        {
            return wrong("decay", layout.decay, decay,
                bt + std::to_string(Hkv) + ") per head or " + bt + heads(Hkv, "d_k", dk) + ") per key dim");
        }
    }
    if (layout.readsBeta)
    {
        Extents const& beta = in[layout.beta];
        if (beta.rank() != 3 || !beta.mayMatch(0, q, 0) || !beta.mayMatch(1, q, 1)
            || !(beta.mayBe(2, Hkv) || beta.mayBe(2, 1)))
        {
            return wrong("beta", layout.beta, beta, bt + std::to_string(Hkv) + ") or (B, T, 1)");
        }
    }
    if (mask.rank() != 2 || !mask.mayMatch(0, q, 0) || !mask.mayMatch(1, q, 1))
    {
        return wrong("mask_pad", layout.maskPad, mask, "(B, T), query's two leading extents");
    }
    return true;
}

std::string describe(LinearRecurrenceParameters const& p)
{
    return "q_num_heads " + std::to_string(p.qNumHeads) + ", kv_num_heads " + std::to_string(p.kvNumHeads)
        + ", update_rule " + LinearRecurrencePlugin::updateRules()[static_cast<size_t>(p.updateRule)] + ", qk_l2_norm "
        + std::to_string(p.qkL2Norm);
}

} // namespace

std::vector<char const*> const& LinearRecurrencePlugin::updateRules()
{
    // kernels::LinearRecurrenceRule's order: kLINEAR, kGATED, kDELTA, kGATED_DELTA.
    static std::vector<char const*> const rules{"linear", "gated", "delta", "gated_delta"};
    return rules;
}

std::vector<Field<LinearRecurrenceParameters>> const& LinearRecurrencePlugin::fields()
{
    static std::vector<Field<LinearRecurrenceParameters>> const table{
        {"q_num_heads", &LinearRecurrenceParameters::qNumHeads, 0.0, true},
        {"kv_num_heads", &LinearRecurrenceParameters::kvNumHeads, 0.0, true},
        {"update_rule", &LinearRecurrenceParameters::updateRule, updateRules(), 3},
        {"scale", &LinearRecurrenceParameters::scale, 0.0},
        {"qk_l2_norm", &LinearRecurrenceParameters::qkL2Norm, 0.0},
    };
    return table;
}

bool LinearRecurrencePlugin::checkParameters(LinearRecurrenceParameters const& p) noexcept
{
    if (p.qNumHeads <= 0 || p.kvNumHeads <= 0)
    {
        logPluginError("q_num_heads and kv_num_heads must be positive, got " + std::to_string(p.qNumHeads) + " and "
            + std::to_string(p.kvNumHeads));
        return false;
    }
    if (p.qNumHeads % p.kvNumHeads != 0 && p.kvNumHeads % p.qNumHeads != 0)
    {
        logPluginError("q_num_heads " + std::to_string(p.qNumHeads) + " and kv_num_heads "
            + std::to_string(p.kvNumHeads) + ": expected one a multiple of the other");
        return false;
    }
    // update_rule is a string field: PluginBase refuses an index outside its choices.
    if (!isEither("qk_l2_norm", p.qkL2Norm, 0, 1))
    {
        return false;
    }
    if (!std::isfinite(p.scale))
    {
        logPluginError("scale must be finite");
        return false;
    }
    return true;
}

LinearRecurrenceInputs LinearRecurrencePlugin::inputsFor(LinearRecurrenceParameters const& params) noexcept
{
    auto const rule = static_cast<kernels::LinearRecurrenceRule>(params.updateRule);
    LinearRecurrenceInputs in;
    in.readsDecay =
        rule == kernels::LinearRecurrenceRule::kGATED || rule == kernels::LinearRecurrenceRule::kGATED_DELTA;
    in.readsBeta = rule == kernels::LinearRecurrenceRule::kDELTA || rule == kernels::LinearRecurrenceRule::kGATED_DELTA;
    return in;
}

TensorRole LinearRecurrencePlugin::tensorRole(LinearRecurrenceInputs const& layout, int32_t pos) noexcept
{
    // query, key, value, decay, beta (read or dummies) and output are activations; past_state and present_state
    // state; mask_pad the mask.
    return stateOrMaskRole(pos, layout.pastState, layout.maskPad);
}

int32_t LinearRecurrencePlugin::outputShapes(nvinfer1::DimsExprs const* inputs, LinearRecurrenceInputs const& layout,
    nvinfer1::DimsExprs* outputs, nvinfer1::IExprBuilder& exprBuilder)
{
    // Extents known at build time (constants) must fit the fields and each other; symbolic ones are checked on
    // the concrete shapes by onShapeChange (checkShapes, the same checks).
    InputExtents const in(inputs, kSIGNATURE.nbInputs);
    int64_t dk = -1;
    int64_t dv = -1;
    std::string error;
    if (!checkExtents(in.data(), layout, mParams, dk, dv, error))
    {
        logLayerError(error + " (" + describe(mParams) + "; extents known at build time)");
        return -1;
    }
    nvinfer1::DimsExprs const& q = inputs[layout.query];
    nvinfer1::DimsExprs const& v = inputs[layout.value];
    // output (B, T, H_o*d_v), H_o = max(H_q, H_kv), d_v = value's last extent / H_kv: value's last extent when
    // H_q <= H_kv (one head per state), else H_q * (value's last extent / H_kv).
    nvinfer1::IDimensionExpr const* width = v.d[2];
    if (mParams.qNumHeads > mParams.kvNumHeads)
    {
        auto const* perHead = exprBuilder.operation(
            nvinfer1::DimensionOperation::kFLOOR_DIV, *v.d[2], *exprBuilder.constant(mParams.kvNumHeads));
        width = perHead != nullptr ? exprBuilder.operation(nvinfer1::DimensionOperation::kPROD,
                                         *exprBuilder.constant(mParams.qNumHeads), *perHead)
                                   : nullptr;
    }
    if (width == nullptr)
    {
        logLayerError("the expression builder gave no output extent");
        return -1;
    }
    outputs[0].nbDims = 3;
    outputs[0].d[0] = q.d[0];
    outputs[0].d[1] = q.d[1];
    outputs[0].d[2] = width;
    // present_state continues past_state: its shape.
    outputs[1] = inputs[layout.pastState];
    return 0;
}

bool LinearRecurrencePlugin::checkShapes(
    nvinfer1::PluginTensorDesc const* in, LinearRecurrenceInputs const& layout) const
{
    InputExtents const extents(in, kSIGNATURE.nbInputs);
    int64_t dk = -1;
    int64_t dv = -1;
    std::string error;
    bool ok = checkExtents(extents.data(), layout, mParams, dk, dv, error);
    nvinfer1::Dims const& q = in[layout.query].dims;
    if (ok && (q.d[0] > INT32_MAX || q.d[1] > INT32_MAX || q.d[0] < 0 || q.d[1] < 0 || dk < 1 || dv < 1))
    {
        error = "query (input 0) is " + toString(q) + ": extents must be 0..INT32_MAX and head dims >= 1";
        ok = false;
    }
    if (!ok)
    {
        logLayerError(error + " (" + describe(mParams) + ")");
    }
    return ok;
}

int32_t LinearRecurrencePlugin::launch(LaunchArgs const& args) noexcept
{
    auto params = args.kernelParams<kernels::LinearRecurrenceParams>();
    nvinfer1::Dims const& q = args.inputDesc[mLayout.query].dims;
    params.batch = args.extent(mLayout.query, 0);
    params.length = args.extent(mLayout.query, 1);
    params.q_heads = mParams.qNumHeads;
    params.kv_heads = mParams.kvNumHeads;
    params.dim_k = static_cast<int>(q.d[2] / mParams.qNumHeads);
    params.dim_v = static_cast<int>(args.inputDesc[mLayout.value].dims.d[2] / mParams.kvNumHeads);
    params.rule = static_cast<kernels::LinearRecurrenceRule>(mParams.updateRule);
    // Per key dim when decay's last extent is H_kv*d_k (and not also H_kv, i.e. d_k > 1: then both read alike);
    // beta per head when its last extent is H_kv (H_kv = 1: both alike).
    params.decay_per_key = mLayout.readsDecay && params.dim_k > 1
        && args.inputDesc[mLayout.decay].dims.d[2] == static_cast<int64_t>(params.kv_heads) * params.dim_k;
    params.beta_per_head = mLayout.readsBeta && args.inputDesc[mLayout.beta].dims.d[2] == params.kv_heads;
    params.scale = mParams.scale;
    params.kernel = kernels::LinearRecurrenceKernel::kAUTO;
    params.qk_l2_norm = mParams.qkL2Norm != 0;
    // decay / beta only when the rule reads them (else their bindings are dummies); the state and the mask always.
    void const* const* in = args.inputs;
    return launched(kernels::linearRecurrenceForward(params, args.type, in[mLayout.query], in[mLayout.key],
        in[mLayout.value], args.stateInput(mLayout.pastState), mLayout.readsDecay ? in[mLayout.decay] : nullptr,
        mLayout.readsBeta ? in[mLayout.beta] : nullptr, in[mLayout.maskPad], args.outputs[0], args.stateOutput(1),
        args.stream));
}

RNNX_REGISTER_PLUGIN_CREATOR(LinearRecurrencePluginCreator);

} // namespace plugin
} // namespace rnnx
