/*
 * CausalConvWithState plugin's enqueue on the real kernels (plugin_enqueue_gpu on a CUDA device,
 * plugin_enqueue_emulated on the CUDA host emulation) against a plain C++ reference of docs/ops.md (causal convolution
 * with state); enqueueGpuTests.cpp says how the cases walk a plugin through TensorRT's calls. Helpers:
 * enqueueTestUtils.h.
 * Node layout: exactly five inputs (input, weight, bias, past_state, mask_pad); K 1..5 and every activation.
 */
#include "enqueueTestUtils.h"
#include "causal_conv_with_state/tests/causalConvWithStateTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;

namespace
{

char const* const kACTIVATIONS[] = {"none", "silu", "swish"};

struct ConvConfig
{
    Act act{Act::kF32};
    int32_t B{1}, C{1}, T{1}, K{1};
    int32_t activation{0}; // index in kACTIVATIONS
    bool mask{false};
    bool givenState{true};

    std::string str() const
    {
        std::ostringstream out;
        out << name(act) << " B=" << B << " C=" << C << " T=" << T << " K=" << K << " " << kACTIVATIONS[activation]
            << (mask ? " mask" : "") << (givenState ? " state" : " zero state");
        return out.str();
    }
};

//! docs/ops.md "Causal convolution with state" in fp64: the window is past_state then the real steps; a pad step
//! gives 0 and does not move it.
void convReference(ConvConfig const& c, std::vector<double> const& x, std::vector<double> const& w,
    std::vector<double> const& bias, std::vector<double> const& S0, std::vector<uint8_t> const& pads,
    std::vector<double>& out, std::vector<double>& SLast)
{
    out.assign(x.size(), 0.0);
    SLast = S0;
    std::vector<double> window(static_cast<size_t>(c.K));
    for (int32_t b = 0; b < c.B; ++b)
    {
        for (int32_t ch = 0; ch < c.C; ++ch)
        {
            double* state = SLast.data() + (static_cast<size_t>(b) * c.C + ch) * (c.K - 1);
            for (int32_t t = 0; t < c.T; ++t)
            {
                size_t const at = (static_cast<size_t>(b) * c.C + ch) * c.T + t;
                if (pads[static_cast<size_t>(b) * c.T + t] != 0)
                {
                    continue;
                }
                std::copy(state, state + (c.K - 1), window.begin());
                window[static_cast<size_t>(c.K - 1)] = x[at];
                double y = bias[static_cast<size_t>(ch)];
                for (int32_t j = 0; j < c.K; ++j)
                {
                    y += w[static_cast<size_t>(ch) * c.K + j] * window[static_cast<size_t>(j)];
                }
                out[at] = c.activation != 0 ? y / (1.0 + std::exp(-y)) : y;
                std::copy(window.begin() + 1, window.end(), state);
            }
        }
    }
}

//! Runs `c` through the plugin in segments (the first `prefill` steps, then one step per call, the state fed back
//! through two buffers) and compares output and present_state with the reference.
void convCase(ConvConfig const& c, int32_t prefill)
{
    size_t const rows = static_cast<size_t>(c.B) * c.C;
    std::vector<double> x = randn(rows * c.T, 1.0);
    std::vector<double> w = randn(static_cast<size_t>(c.C) * c.K, 0.5);
    std::vector<double> bias = randn(static_cast<size_t>(c.C), 0.5);
    std::vector<double> S0 = c.givenState ? randn(rows * (c.K - 1), 1.0) : std::vector<double>(rows * (c.K - 1), 0.0);
    std::vector<uint8_t> pads(static_cast<size_t>(c.B) * c.T, 0);
    for (size_t i = 0; c.mask && i < pads.size(); ++i)
    {
        pads[i] = randInt(0, 3) == 0 ? 1 : 0;
    }
    encode(x, c.act);
    std::vector<uint8_t> const S0Bytes = encodeF32(S0);
    std::vector<uint8_t> const wBytes = encode(w, c.act);
    std::vector<uint8_t> const biasBytes = encode(bias, c.act);
    std::vector<double> outRef, SRef;
    convReference(c, x, w, bias, S0, pads, outRef, SRef);
    DataType const t = trtType(c.act);
    Fields fields = convFields(kACTIVATIONS[c.activation]);
    addParserExtras(fields);
    auto const descs = [&](int32_t len, std::vector<PluginTensorDesc>& inDesc, std::vector<PluginTensorDesc>& outDesc)
    {
        inDesc = {desc({c.B, c.C, len}, t), desc({c.C, 1, c.K}, t), desc({c.C}, t),
            desc({c.B, c.C, c.K - 1}, DataType::kFLOAT), desc({c.B, len}, DataType::kINT32)};
        outDesc = {desc({c.B, c.C, len}, t), desc({c.B, c.C, c.K - 1}, DataType::kFLOAT)};
    };
    std::vector<PluginTensorDesc> inDesc, outDesc;
    descs(c.T, inDesc, outDesc);
    auto plugin = buildWithoutWorkspace<plugin::CausalConvWithStatePlugin, plugin::CausalConvWithStatePluginCreator>(
        fields, inDesc, outDesc);
    DeviceBuffer weight = upload(wBytes), biasBuffer = upload(biasBytes);
    std::vector<double> outAll(outRef.size(), NAN);
    // K = 1: an empty state.
    std::vector<uint8_t> const SLast = runPrefillThenSteps(c.T, prefill, S0Bytes,
        [&](int32_t t0, int32_t t1, void* past, void* present, cudaStream_t stream)
        {
            int32_t const len = t1 - t0;
            descs(len, inDesc, outDesc);
            // input (B, C, T) is (B*C, T, 1) step-sliced.
            std::vector<double> xPart = sliceSteps(x, static_cast<int32_t>(rows), c.T, 1, t0, t1);
            DeviceBuffer input = upload(encode(xPart, c.act));
            DeviceBuffer mask = upload(maskBytes(sliceSteps(pads, c.B, c.T, 1, t0, t1), MaskKind::kInt32));
            DeviceBuffer out(rows * len * elementSize(c.act));
            run(*plugin, inDesc, outDesc, {input.get(), weight.get(), biasBuffer.get(), past, mask.get()},
                {out.get(), present}, nullptr, stream);
            scatterSteps(
                outAll, decode(download(out.get(), out.bytes()), c.act), static_cast<int32_t>(rows), c.T, 1, t0, t1);
        });
    std::string const what = " [" + c.str() + ", prefill " + std::to_string(prefill) + "]";
    CHECK_MSG(compare("output" + what, outAll, outRef, magnitudeTolerance(c.act, outRef)));
    // The state holds past inputs (already of the activation type): exact.
    CHECK_MSG(compare("present_state" + what, decodeF32(SLast), SRef, Tolerance{0.0, 0.0}));
}

//! A case of kernel size `K` and `activation` (index in kACTIVATIONS), masked when K + activation is even, with a
//! given state unless the activation is swish; B 1..3, C 1..70 and T 1..30 drawn at random.
ConvConfig randomConvConfig(Act act, int32_t K, int32_t activation)
{
    ConvConfig c;
    c.act = act;
    c.K = K;
    c.activation = activation;
    c.mask = (K + activation) % 2 == 0;
    c.givenState = activation != 2;
    c.B = randInt(1, 3);
    c.C = randInt(1, 70);
    c.T = randInt(1, 30);
    return c;
}

//! K 1..5, every activation, mask, state given or zeros; one call, then prefill + steps.
void convRandomShapes(Act act)
{
    for (int32_t K = 1; K <= 5; ++K)
    {
        for (int32_t activation = 0; activation < 3; ++activation)
        {
            ConvConfig const c = randomConvConfig(act, K, activation);
            inOneCallThenStepped(c.T, [&](int32_t prefill) { convCase(c, prefill); });
        }
    }
}

// ------------------------------------------------------------------------------------------------------------
// Test cases, in run order (each name also seeds the case's random stream).

test::Registrar const kTestCases[] = {
    {"CausalConvWithState enqueue: K 1..5, none / silu / swish, mask, state, one call and prefill-then-step, all "
     "dtypes",
        forSelectedTypes(convRandomShapes)},
};

} // namespace
