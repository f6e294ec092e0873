/*
 * LinearRecurrence plugin's enqueue on the real kernels (plugin_enqueue_gpu on a CUDA device, plugin_enqueue_emulated
 * on the CUDA host emulation) against a plain C++ reference of docs/ops.md (linear recurrence); enqueueGpuTests.cpp
 * says how the cases walk a plugin through TensorRT's calls. Helpers: enqueueTestUtils.h.
 * Node layout: exactly seven inputs (query, key, value, past_state, decay, beta, mask_pad; decay / beta NaN
 * dummies for the rules that do not read them, so a read shows); every rule, GQA, per-head / per-key decay,
 * per-head / shared beta, head dims up to 256; grouped value (H_kv a multiple of H_q) and qk_l2_norm.
 */
#include "enqueueTestUtils.h"
#include "linear_recurrence/tests/linearRecurrenceTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;

namespace
{

char const* const kRULES[] = {"linear", "gated", "delta", "gated_delta"};

struct RecurrenceConfig
{
    Act act{Act::kF32};
    int32_t B{1}, T{1}, Hq{1}, Hkv{1}, dk{1}, dv{1};
    int32_t rule{3}; // index in kRULES
    bool perKey{false};
    bool betaPerHead{true};
    float scale{0.F};
    bool mask{false};
    bool givenState{true};
    int32_t qkL2Norm{0};

    //! Key heads (min(H_q, H_kv)) and output heads (max(H_q, H_kv)).
    int32_t Hk() const
    {
        return std::min(Hq, Hkv);
    }
    int32_t Ho() const
    {
        return std::max(Hq, Hkv);
    }
    bool gated() const
    {
        return rule == 1 || rule == 3;
    }
    bool delta() const
    {
        return rule == 2 || rule == 3;
    }
    //! decay's and beta's last extents as the exporter writes them (dummies for the rules that do not read them).
    int32_t decayWidth() const
    {
        return gated() && perKey ? Hkv * dk : Hkv;
    }
    int32_t betaWidth() const
    {
        return delta() && betaPerHead ? Hkv : 1;
    }
    std::string str() const
    {
        std::ostringstream out;
        out << name(act) << " " << kRULES[rule] << " B=" << B << " T=" << T << " Hq=" << Hq << " Hkv=" << Hkv
            << " dk=" << dk << " dv=" << dv << (gated() ? (perKey ? " decay per key" : " decay per head") : "")
            << (delta() ? (betaPerHead ? " beta per head" : " shared beta") : "") << " scale=" << scale
            << (mask ? " mask" : "") << (givenState ? " state" : " zero state") << (qkL2Norm ? " qk_l2_norm" : "");
        return out.str();
    }
};

struct RecurrenceData
{
    std::vector<double> q, k, v, S0, decay, beta;
    std::vector<uint8_t> pads;
};

//! Divides each of the `heads` rows of d values of x by sqrt(sum(x^2) + eps).
void normalizeHeads(std::vector<double>& x, size_t heads, int32_t d, double eps)
{
    for (size_t head = 0; head < heads; ++head)
    {
        double norm = 0.0;
        for (int32_t e = 0; e < d; ++e)
        {
            norm += x[head * d + e] * x[head * d + e];
        }
        for (int32_t e = 0; e < d; ++e)
        {
            x[head * d + e] /= std::sqrt(norm + eps);
        }
    }
}

//! Random inputs, rounded to their types: keys of unit norm per head (as the delta rules expect; norm 3, and queries
//! times 3, with qk_l2_norm, which normalises them), decay in log space in [-1, 0), beta in (0, 1); decay / beta NaN
//! dummies for the rules that do not read them (a read shows as NaN).
RecurrenceData recurrenceData(RecurrenceConfig const& c)
{
    RecurrenceData d;
    size_t const BT = static_cast<size_t>(c.B) * c.T;
    d.q = randn(BT * c.Hq * c.dk, c.qkL2Norm ? 3.0 : 1.0);
    d.k = randn(BT * c.Hk() * c.dk, 1.0);
    normalizeHeads(d.k, BT * c.Hk(), c.dk, 1e-12);
    for (double& x : d.k)
    {
        x *= c.qkL2Norm ? 3.0 : 1.0;
    }
    d.v = randn(BT * c.Hkv * c.dv, 1.0);
    d.S0 = c.givenState ? randn(static_cast<size_t>(c.B) * c.Hkv * c.dk * c.dv, 0.5)
                        : std::vector<double>(static_cast<size_t>(c.B) * c.Hkv * c.dk * c.dv, 0.0);
    d.decay = c.gated() ? randu(BT * c.decayWidth(), -1.0, -0.01) : std::vector<double>(BT * c.decayWidth(), NAN);
    d.beta = c.delta() ? randu(BT * c.betaWidth(), 0.05, 0.95) : std::vector<double>(BT * c.betaWidth(), NAN);
    d.pads.assign(BT, 0);
    for (size_t i = 0; c.mask && i < BT; ++i)
    {
        d.pads[i] = randInt(0, 3) == 0 ? 1 : 0;
    }
    encode(d.q, c.act);
    encode(d.k, c.act);
    encode(d.v, c.act);
    encode(d.decay, c.act);
    encode(d.beta, c.act);
    encodeF32(d.S0);
    return d;
}

//! docs/ops.md "Linear recurrence" in fp64: per kv head S_t from S_{t-1} by the rule (carried over pads), then
//! o_t = scale * S_t^T q_t for every query head of the group (grouped query: G = H_q / H_kv heads per state, key head
//! j) or for state j's own output head (grouped value: query and key head j / R). With qk_l2_norm the query and key
//! heads are first divided by sqrt(sum(x^2) + 1e-6).
void recurrenceReference(
    RecurrenceConfig const& c, RecurrenceData const& raw, std::vector<double>& out, std::vector<double>& SLast)
{
    RecurrenceData in = raw;
    size_t const BT = static_cast<size_t>(c.B) * c.T;
    if (c.qkL2Norm != 0)
    {
        normalizeHeads(in.q, BT * c.Hq, c.dk, 1e-6);
        normalizeHeads(in.k, BT * c.Hk(), c.dk, 1e-6);
    }
    int32_t const G = c.Ho() / c.Hkv; // output (and query) heads per state
    int32_t const R = c.Hkv / c.Hk(); // states per key head
    double const scale = c.scale != 0.F ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.dk));
    out.assign(BT * c.Ho() * c.dv, 0.0);
    SLast = in.S0;
    std::vector<double> kS(static_cast<size_t>(c.dv));
    for (int32_t b = 0; b < c.B; ++b)
    {
        for (int32_t j = 0; j < c.Hkv; ++j)
        {
            double* S = &SLast[(static_cast<size_t>(b) * c.Hkv + j) * c.dk * c.dv];
            for (int32_t t = 0; t < c.T; ++t)
            {
                size_t const bt = static_cast<size_t>(b) * c.T + t;
                if (in.pads[bt] == 0)
                {
                    double const* k = &in.k[(bt * c.Hk() + j / R) * c.dk];
                    double const* v = &in.v[(bt * c.Hkv + j) * c.dv];
                    if (c.gated())
                    {
                        for (int32_t e = 0; e < c.dk; ++e)
                        {
                            double const a = std::exp(in.decay[bt * c.decayWidth() + (c.perKey ? j * c.dk + e : j)]);
                            for (int32_t m = 0; m < c.dv; ++m)
                            {
                                S[e * c.dv + m] *= a;
                            }
                        }
                    }
                    double const beta = c.delta() ? in.beta[bt * c.betaWidth() + (c.betaPerHead ? j : 0)] : 1.0;
                    for (int32_t m = 0; m < c.dv; ++m)
                    {
                        kS[m] = 0.0;
                        for (int32_t e = 0; c.delta() && e < c.dk; ++e)
                        {
                            kS[m] += S[e * c.dv + m] * k[e];
                        }
                    }
                    for (int32_t e = 0; e < c.dk; ++e)
                    {
                        for (int32_t m = 0; m < c.dv; ++m)
                        {
                            S[e * c.dv + m] += k[e] * (c.delta() ? beta * (v[m] - kS[m]) : v[m]);
                        }
                    }
                }
                for (int32_t g = 0; g < G; ++g)
                {
                    int32_t const h = j * G + g; // output head
                    double const* q = &in.q[(bt * c.Hq + j / R * G + g) * c.dk];
                    for (int32_t m = 0; m < c.dv; ++m)
                    {
                        double o = 0.0;
                        for (int32_t e = 0; e < c.dk; ++e)
                        {
                            o += S[e * c.dv + m] * q[e];
                        }
                        out[(bt * c.Ho() + h) * c.dv + m] = scale * o;
                    }
                }
            }
        }
    }
}

//! Runs `c` through the plugin as TensorRT would (build, serialise, deserialise, attach), in segments: the first
//! `prefill` steps in one call, then one step per call, the state fed back through two buffers (ping-pong; the
//! state a call reads is checked unchanged). Compares output and present_state with the reference.
void recurrenceCase(RecurrenceConfig const& c, int32_t prefill, MaskKind maskKind = MaskKind::kInt32)
{
    RecurrenceData const in = recurrenceData(c);
    std::vector<double> outRef, SRef;
    recurrenceReference(c, in, outRef, SRef);
    DataType const t = trtType(c.act);
    Fields fields = recurrenceFields(c.Hq, c.Hkv, kRULES[c.rule], c.scale, c.qkL2Norm);
    addParserExtras(fields);
    auto const descs = [&](int32_t len, std::vector<PluginTensorDesc>& inDesc, std::vector<PluginTensorDesc>& outDesc)
    {
        inDesc = {desc({c.B, len, c.Hq * c.dk}, t), desc({c.B, len, c.Hk() * c.dk}, t),
            desc({c.B, len, c.Hkv * c.dv}, t), desc({c.B, c.Hkv, c.dk, c.dv}, DataType::kFLOAT),
            desc({c.B, len, c.decayWidth()}, t), desc({c.B, len, c.betaWidth()}, t),
            desc({c.B, len}, trtMaskType(maskKind))};
        outDesc = {desc({c.B, len, c.Ho() * c.dv}, t), desc({c.B, c.Hkv, c.dk, c.dv}, DataType::kFLOAT)};
    };
    std::vector<PluginTensorDesc> inDesc, outDesc;
    descs(c.T, inDesc, outDesc);
    auto plugin = buildWithoutWorkspace<plugin::LinearRecurrencePlugin, plugin::LinearRecurrencePluginCreator>(
        fields, inDesc, outDesc);
    std::vector<double> S0 = in.S0;
    std::vector<double> outAll(outRef.size(), NAN);
    std::vector<uint8_t> const SLast = runPrefillThenSteps(c.T, prefill, encodeF32(S0),
        [&](int32_t t0, int32_t t1, void* past, void* present, cudaStream_t stream)
        {
            int32_t const len = t1 - t0;
            descs(len, inDesc, outDesc);
            auto const part = [&](std::vector<double> const& x, int32_t W)
            {
                std::vector<double> slice = sliceSteps(x, c.B, c.T, W, t0, t1);
                return upload(encode(slice, c.act));
            };
            DeviceBuffer q = part(in.q, c.Hq * c.dk), k = part(in.k, c.Hk() * c.dk), v = part(in.v, c.Hkv * c.dv);
            DeviceBuffer decay = part(in.decay, c.decayWidth()), beta = part(in.beta, c.betaWidth());
            DeviceBuffer mask = upload(maskBytes(sliceSteps(in.pads, c.B, c.T, 1, t0, t1), maskKind));
            DeviceBuffer out(static_cast<size_t>(c.B) * len * c.Ho() * c.dv * elementSize(c.act));
            run(*plugin, inDesc, outDesc, {q.get(), k.get(), v.get(), past, decay.get(), beta.get(), mask.get()},
                {out.get(), present}, nullptr, stream);
            scatterSteps(outAll, decode(download(out.get(), out.bytes()), c.act), c.B, c.T, c.Ho() * c.dv, t0, t1);
        });
    std::string const what = " [" + c.str() + ", prefill " + std::to_string(prefill) + ", " + name(maskKind) + " mask]";
    CHECK_MSG(compare("output" + what, outAll, outRef, magnitudeTolerance(c.act, outRef)));
    CHECK_MSG(compare("present_state" + what, decodeF32(SLast), SRef, magnitudeTolerance(Act::kF32, SRef)));
}

//! For each rule and variant 0..2, a config of activation `act`, that rule and batch 1..2, the rest set by
//! `vary(c, variant)`, run in one call, then as a prefill followed by steps.
template <typename Vary> void eachRuleAndVariant(Act act, Vary const& vary)
{
    for (int32_t rule = 0; rule < 4; ++rule)
    {
        for (int32_t variant = 0; variant < 3; ++variant)
        {
            RecurrenceConfig c;
            c.act = act;
            c.rule = rule;
            c.B = randInt(1, 2);
            vary(c, variant);
            inOneCallThenStepped(c.T, [&](int32_t prefill) { recurrenceCase(c, prefill); });
        }
    }
}

//! Every rule, GQA groups 1 / 2 / 4, decay per head / per key, beta per head / shared, head dims 16..128 (and odd
//! ones), given scale or 1/sqrt(d_k), with and without mask and state; one call, then prefill + steps.
void recurrenceRandomShapes(Act act)
{
    eachRuleAndVariant(act,
        [](RecurrenceConfig& c, int32_t variant)
        {
            c.T = randInt(1, 40);
            c.Hkv = randInt(1, 2);
            c.Hq = c.Hkv * (variant == 0 ? 1 : (variant == 1 ? 2 : 4));
            int32_t const dims[] = {16, 32, 64, 128, 7, 40};
            c.dk = dims[randInt(0, 5)];
            c.dv = dims[randInt(0, 5)];
            c.perKey = variant != 1;
            c.betaPerHead = variant != 2;
            c.scale = variant == 2 ? 0.5F : 0.F;
            c.mask = variant != 0;
            c.givenState = variant != 1;
        });
}

//! The largest head dims (256) and a mask in each element type: int32 (TensorRT's), uint8 and bool alike.
void recurrenceLimitsAndMasks()
{
    for (Act act : selectedActs())
    {
        RecurrenceConfig c;
        c.act = act;
        c.B = 1;
        c.T = 9;
        c.Hq = 2;
        c.Hkv = 1;
        c.dk = 256;
        c.dv = 256;
        c.rule = 3;
        c.perKey = true;
        c.mask = true;
        recurrenceCase(c, 5);
        c.dk = 32;
        c.dv = 16;
        c.T = 12;
        for (MaskKind kind : {MaskKind::kInt32, MaskKind::kUint8, MaskKind::kBool})
        {
            recurrenceCase(c, 12, kind);
        }
    }
}

//! Grouped value (H_kv = R H_q, R 2 or 3) with and without qk_l2_norm, and GQA with it: every rule, head dims
//! 128 / odd, mask and state, one call and prefill + steps.
void recurrenceGroupedValue(Act act)
{
    eachRuleAndVariant(act,
        [](RecurrenceConfig& c, int32_t variant)
        {
            c.T = randInt(2, 24);
            int32_t const heads = randInt(1, 2);
            c.Hq = variant == 2 ? heads * 2 : heads;
            c.Hkv = variant == 2 ? heads : heads * (variant == 0 ? 2 : 3);
            int32_t const dims[] = {128, 23, 32};
            c.dk = dims[(c.rule + variant) % 3];
            c.dv = dims[(c.rule + variant + 1) % 3];
            c.perKey = variant != 1;
            c.betaPerHead = variant != 2;
            c.mask = variant != 1;
            c.qkL2Norm = variant == 1 ? 0 : 1;
        });
}

// ------------------------------------------------------------------------------------------------------------
// Test cases, in run order (each name also seeds the case's random stream).

test::Registrar const kTestCases[] = {
    {"LinearRecurrence enqueue: every rule, GQA, decay per head / per key, beta per head / shared, mask, state, "
     "one call and prefill-then-step (ping-pong), all dtypes",
        forSelectedTypes(recurrenceRandomShapes)},
    {"LinearRecurrence head dims 256; mask_pad int32, uint8 and bool alike", recurrenceLimitsAndMasks},
    {"LinearRecurrence enqueue: grouped value (H_kv a multiple of H_q) and qk_l2_norm, every rule, head dims 128 and "
     "23, "
     "one call and prefill-then-step, all dtypes",
        forSelectedTypes(recurrenceGroupedValue)},
};

} // namespace
