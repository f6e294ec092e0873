/*
 * CausalLinearAttention plugin's enqueue on the real kernels (plugin_enqueue_gpu on a CUDA device,
 * plugin_enqueue_emulated on the CUDA host emulation) against a plain C++ reference of docs/ops.md (causal linear
 * attention); enqueueGpuTests.cpp says how the cases walk a plugin through TensorRT's calls. Helpers:
 * enqueueTestUtils.h.
 * Node layout: exactly six inputs (q, k, v (B, L, H*.) or time-major (L, B, H*.), S0, z0, mask_pad; S0 / z0
 * zeros when no state is given, mask_pad all false without padding); head dims 32 / 64 / 128 and generic ones.
 */
#include "enqueueTestUtils.h"
#include "causal_linear_attention/tests/causalLinearAttentionTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;

namespace
{

struct AttentionConfig
{
    int32_t B, H, L, E, M;
    //! Whether the model gave S0 / z0 (random); otherwise the node still has them, as zeros.
    bool hasS0, hasZ0;
    //! q, k, v, out (L, B, H*.) and mask_pad (L, B); else batch-first.
    bool timeMajor;
    //! mask: real padding (pads at both ends and in the middle); without it mask_pad is still an input, all false.
    bool mask;
    MaskKind maskKind{MaskKind::kInt32};
    float eps;
    Act act;

    std::string str() const
    {
        std::ostringstream s;
        s << name(act) << " B=" << B << " H=" << H << " L=" << L << " E=" << E << " M=" << M
          << (timeMajor ? " time-major" : " batch-first") << " inputs=q,k,v,S0,z0,mask_pad (S0 "
          << (hasS0 ? "given" : "zeros") << ", z0 " << (hasZ0 ? "given" : "zeros") << ", mask "
          << (mask ? "padded " : "all-false ") << name(maskKind) << ") eps=" << eps;
        return s.str();
    }

    //! The row of token t of batch row b among the (B*L) or (L*B) rows of a call of `length` tokens: q's
    //! elements (row*H + h)*E + e, v's and out's (row*H + h)*M + m, mask_pad's row.
    size_t row(int32_t b, int32_t t, int32_t length) const
    {
        return timeMajor ? static_cast<size_t>(t) * B + b : static_cast<size_t>(b) * length + t;
    }
};

//! Host inputs in the node's layout, already rounded to their types (q, k, v heads packed; mask_pad 0 / 1).
struct AttentionData
{
    std::vector<double> q, k, v, S0, z0;
    //! Pad flags in mask_pad's layout, 1 = pad; bound in the case's MaskKind (maskBytes).
    std::vector<uint8_t> mask;
};

AttentionData attentionData(AttentionConfig const& c)
{
    size_t const rows = static_cast<size_t>(c.B) * c.L;
    size_t const BH = static_cast<size_t>(c.B) * c.H;
    AttentionData in;
    in.q = randn(rows * c.H * c.E, 0.5);
    in.k = randn(rows * c.H * c.E, 0.5);
    in.v = randn(rows * c.H * c.M, 1.0);
    in.S0 = randn(BH * c.E * c.M, 0.5);
    in.z0 = randu(BH * c.E, 0.0, 4.0);
    if (!c.hasS0)
    {
        std::fill(in.S0.begin(), in.S0.end(), 0.0);
    }
    if (!c.hasZ0)
    {
        std::fill(in.z0.begin(), in.z0.end(), 0.0);
    }
    in.mask.assign(rows, 0);
    if (c.mask)
    {
        // Row 0 pads its first and last steps; every row pads about one step in four, anywhere. Except step 0 when
        // S0 is given and z0 is not: a pad there would leave phi(q) z = 0, out = phi(q) S0 / eps, which no activation
        // type rounds meaningfully.
        bool const keepFirst = c.hasS0 && !c.hasZ0;
        for (int32_t b = 0; b < c.B; ++b)
        {
            for (int32_t t = 0; t < c.L; ++t)
            {
                bool const end = b == 0 && (t == 0 || t == c.L - 1);
                bool const pad = (end || randInt(0, 3) == 0) && !(keepFirst && t == 0);
                in.mask[c.row(b, t, c.L)] = pad ? 1 : 0;
            }
        }
    }
    return in;
}

double phi(double x)
{
    return x > 0.0 ? x + 1.0 : std::exp(x);
}

//! docs/ops.md "Causal linear attention" as the time loop, in fp64, on the node's layout. S0 / z0 hold zeros when
//! absent; a pad step keeps S and z and still has its output.
void attentionReference(AttentionConfig const& c, AttentionData const& in, std::vector<double>& out,
    std::vector<double>& S, std::vector<double>& z)
{
    int32_t const H = c.H, E = c.E, M = c.M;
    out.assign(static_cast<size_t>(c.B) * c.L * H * M, 0.0);
    S = in.S0;
    z = in.z0;
    std::vector<double> pq(E), pk(E), num(M);
    for (int32_t b = 0; b < c.B; ++b)
    {
        for (int32_t h = 0; h < H; ++h)
        {
            size_t const bh = static_cast<size_t>(b) * H + h;
            double* Sbh = &S[bh * E * M];
            double* zbh = &z[bh * E];
            for (int32_t t = 0; t < c.L; ++t)
            {
                size_t const row = c.row(b, t, c.L);
                size_t const qk = (row * H + h) * E;
                size_t const vo = (row * H + h) * M;
                double const* v = &in.v[vo];
                for (int32_t e = 0; e < E; ++e)
                {
                    pq[e] = phi(in.q[qk + e]);
                    pk[e] = phi(in.k[qk + e]);
                }
                if (in.mask[row] == 0)
                {
                    for (int32_t e = 0; e < E; ++e)
                    {
                        zbh[e] += pk[e];
                        for (int32_t m = 0; m < M; ++m)
                        {
                            Sbh[static_cast<size_t>(e) * M + m] += pk[e] * v[m];
                        }
                    }
                }
                double den = c.eps;
                std::fill(num.begin(), num.end(), 0.0);
                for (int32_t e = 0; e < E; ++e)
                {
                    den += pq[e] * zbh[e];
                    for (int32_t m = 0; m < M; ++m)
                    {
                        num[m] += pq[e] * Sbh[static_cast<size_t>(e) * M + m];
                    }
                }
                for (int32_t m = 0; m < M; ++m)
                {
                    out[vo + m] = num[m] / den;
                }
            }
        }
    }
}

//! State tolerance, relative to the state's magnitude (the test_cuda_kernels.py convention).
Tolerance attentionStateTolerance(Act a, std::vector<double> const& ref)
{
    double const rtol = activationTolerance(a).rtol;
    return {rtol * (maxAbs(ref) + 1.0), rtol};
}

void attentionDescs(
    AttentionConfig const& c, int32_t length, std::vector<PluginTensorDesc>& in, std::vector<PluginTensorDesc>& out)
{
    DataType const t = trtType(c.act);
    int64_t const d0 = c.timeMajor ? length : c.B;
    int64_t const d1 = c.timeMajor ? c.B : length;
    auto const qd = desc({d0, d1, c.H * c.E}, t);
    auto const vd = desc({d0, d1, c.H * c.M}, t);
    auto const Sd = desc({c.B, c.H, c.E, c.M}, DataType::kFLOAT);
    auto const zd = desc({c.B, c.H, c.E}, DataType::kFLOAT);
    auto const md = desc({d0, d1}, trtMaskType(c.maskKind));
    // The TensorRT node's six inputs, whatever the model gave (absent state is bound as zeros, no padding as an
    // all-false mask).
    in = {qd, qd, vd, Sd, zd, md};
    out = {vd, Sd, zd};
}

Fields attentionParserFields(AttentionConfig const& c)
{
    Fields f = attentionFields(c.H, c.eps, c.timeMajor ? 1 : 0);
    addParserExtras(f);
    return f;
}

//! Steps [t0, t1) of a (B, L, X) tensor, or of an (L, B, X) one when timeMajor, as a tensor of t1 - t0 steps.
template <typename T>
std::vector<T> timeSlice(
    std::vector<T> const& full, bool timeMajor, int32_t B, int32_t L, int32_t X, int32_t t0, int32_t t1)
{
    if (timeMajor)
    {
        return std::vector<T>(
            full.begin() + static_cast<size_t>(t0) * B * X, full.begin() + static_cast<size_t>(t1) * B * X);
    }
    std::vector<T> part;
    part.reserve(static_cast<size_t>(B) * (t1 - t0) * X);
    for (int32_t b = 0; b < B; ++b)
    {
        auto const begin = full.begin() + (static_cast<size_t>(b) * L + t0) * X;
        part.insert(part.end(), begin, begin + static_cast<size_t>(t1 - t0) * X);
    }
    return part;
}

//! Writes `part` (steps [t0, t1), timeSlice's layout) back into `full`.
void timeScatter(std::vector<double>& full, std::vector<double> const& part, bool timeMajor, int32_t B, int32_t L,
    int32_t X, int32_t t0, int32_t t1)
{
    if (timeMajor)
    {
        std::copy(part.begin(), part.end(), full.begin() + static_cast<size_t>(t0) * B * X);
        return;
    }
    for (int32_t b = 0; b < B; ++b)
    {
        std::copy(part.begin() + static_cast<size_t>(b) * (t1 - t0) * X,
            part.begin() + static_cast<size_t>(b + 1) * (t1 - t0) * X,
            full.begin() + (static_cast<size_t>(b) * L + t0) * X);
    }
}

//! One attention problem in a single enqueue, against the reference; returns out, S_last and z_last as bytes.
std::vector<std::vector<uint8_t>> attentionOnePass(AttentionConfig const& c, AttentionData in)
{
    size_t const es = elementSize(c.act);
    DeviceBuffer q = upload(encode(in.q, c.act));
    DeviceBuffer k = upload(encode(in.k, c.act));
    DeviceBuffer v = upload(encode(in.v, c.act));
    auto const S0Bytes = encodeF32(in.S0);
    auto const z0Bytes = encodeF32(in.z0);
    DeviceBuffer S0 = upload(S0Bytes);
    DeviceBuffer z0 = upload(z0Bytes);
    DeviceBuffer mask = upload(maskBytes(in.mask, c.maskKind));
    std::vector<double> outRef, SRef, zRef;
    attentionReference(c, in, outRef, SRef, zRef);

    std::vector<PluginTensorDesc> inDesc, outDesc;
    attentionDescs(c, c.L, inDesc, outDesc);
    Fields fields = attentionParserFields(c);
    size_t workspaceBytes = 0;
    auto plugin = buildThenDeserialize<plugin::CausalLinearAttentionPlugin, plugin::CausalLinearAttentionPluginCreator>(
        fields, inDesc, outDesc, workspaceBytes);
    DeviceBuffer workspace(std::max<size_t>(workspaceBytes, 16));

    DeviceBuffer out(outRef.size() * es);
    DeviceBuffer S(S0Bytes.size());
    DeviceBuffer z(z0Bytes.size());
    REQUIRE_CUDA(cudaMemset(out.get(), 0xff, out.bytes()));
    REQUIRE_CUDA(cudaMemset(S.get(), 0xff, S.bytes()));
    REQUIRE_CUDA(cudaMemset(z.get(), 0xff, z.bytes()));
    std::vector<void const*> inPtr{q.get(), k.get(), v.get(), S0.get(), z0.get(), mask.get()};
    std::vector<void*> outPtr{out.get(), S.get(), z.get()};
    Stream stream;
    run(*plugin, inDesc, outDesc, inPtr, outPtr, workspace.get(), stream.get());

    CHECK_MSG(compare(
        "out [" + c.str() + "]", decode(download(out.get(), out.bytes()), c.act), outRef, activationTolerance(c.act)));
    CHECK_MSG(compare("S_last [" + c.str() + "]", decodeF32(download(S.get(), S.bytes())), SRef,
        attentionStateTolerance(c.act, SRef)));
    CHECK_MSG(compare("z_last [" + c.str() + "]", decodeF32(download(z.get(), z.bytes())), zRef,
        attentionStateTolerance(c.act, zRef)));
    CHECK_MSG(bitwiseEqual("S0 after an out-of-place run", download(S0.get(), S0.bytes()), S0Bytes));
    CHECK_MSG(bitwiseEqual("z0 after an out-of-place run", download(z0.get(), z0.bytes()), z0Bytes));
    return {download(out.get(), out.bytes()), download(S.get(), S.bytes()), download(z.get(), z.bytes())};
}

void attentionOnePass(AttentionConfig const& c)
{
    attentionOnePass(c, attentionData(c));
}

int32_t randomLength()
{
    int32_t const pick = randInt(0, 6);
    switch (pick)
    {
    case 0: return 1;
    case 1: return 2;
    case 2: return randInt(63, 65);
    case 3: return randInt(127, 129);
    default: return randInt(3, 200);
    }
}

//! Head dims 32 / 64 / 128 (the chunked MMA kernel; L = 1 the recurrent kernel), every state-input variant, both
//! layouts, padding or not, random B, H, L.
void attentionRandomShapes(Act act)
{
    int32_t variant = randInt(0, 15);
    for (int32_t E : {32, 64, 128})
    {
        for (int32_t M : {32, 64, 128})
        {
            AttentionConfig c{};
            c.act = act;
            c.B = randInt(1, 3);
            c.H = randInt(1, 3);
            c.L = randomLength();
            c.E = E;
            c.M = M;
            c.hasS0 = (variant & 1) != 0;
            c.hasZ0 = (variant & 2) != 0;
            c.timeMajor = (variant & 4) != 0;
            c.mask = (variant & 8) != 0;
            c.maskKind = randomMaskKind();
            c.eps = randInt(0, 3) == 0 ? 0.25F : 1e-6F;
            variant = (variant + 5) % 16;
            attentionOnePass(c);
        }
    }
}

//! Every CausalLinearAttention node the exporter emits for TensorRT: q, k, v, S0, z0, mask_pad, with the state
//! given (random S0 / z0) or not (zeros), padding or an all-false mask, batch-first or time-major, for prefill
//! and L = 1 decode, each activation type.
void attentionNodeLayouts()
{
    int32_t runs = 0;
    for (Act act : selectedActs())
    {
        for (bool given : {false, true})
        {
            for (bool timeMajor : {false, true})
            {
                for (int32_t L : {1, 9})
                {
                    AttentionConfig c{};
                    c.act = act;
                    c.B = randInt(1, 3);
                    c.H = randInt(1, 3);
                    c.L = L;
                    c.E = runs % 2 == 0 ? 32 : 16;
                    c.M = runs % 2 == 0 ? 32 : 8;
                    c.hasS0 = given;
                    c.hasZ0 = given;
                    c.timeMajor = timeMajor;
                    c.mask = (runs / 2) % 2 == 1;
                    c.maskKind = static_cast<MaskKind>(runs % 3);
                    c.eps = 1e-6F;
                    attentionOnePass(c);
                    ++runs;
                }
            }
        }
    }
    CHECK_EQ(runs, 8 * static_cast<int32_t>(selectedActs().size()));
}

//! Head dims E, M and length L of one attention problem.
struct AttentionDims
{
    int32_t E, M, L;
};

//! An attention problem with both initial states given and real padding: B in [1, 3] and H in [1, maxHeads] drawn
//! in that order, eps 1e-6.
AttentionConfig paddedStatefulConfig(Act act, AttentionDims d, int32_t maxHeads, bool timeMajor, MaskKind maskKind)
{
    AttentionConfig c{};
    c.act = act;
    c.B = randInt(1, 3);
    c.H = randInt(1, maxHeads);
    c.L = d.L;
    c.E = d.E;
    c.M = d.M;
    c.hasS0 = true;
    c.hasZ0 = true;
    c.timeMajor = timeMajor;
    c.mask = true;
    c.maskKind = maskKind;
    c.eps = 1e-6F;
    return c;
}

//! Other head dims (the chunked kernel for L > 1) and L = 1 (the recurrent kernel) with state, padding and both
//! layouts.
void attentionGenericDims(Act act)
{
    int32_t i = 0;
    for (AttentionDims d : {AttentionDims{48, 80, 9}, AttentionDims{8, 24, 5}, AttentionDims{1, 3, 4},
             AttentionDims{64, 64, 1}, AttentionDims{128, 32, 1}, AttentionDims{16, 16, 1}})
    {
        attentionOnePass(paddedStatefulConfig(act, d, 3, i % 2 == 1, static_cast<MaskKind>(i % 3)));
        ++i;
    }
}

/*
 * The same attention problems with mask_pad bound as int32 (what TensorRT gives the plugin), uint8 and bool, for
 * the chunked MMA kernel (E = M = 32, L > 64), the chunked kernel (E = 16, M = 8) and L = 1 (the recurrent kernel),
 * both layouts:
 * each matches the reference, and the three give bitwise the same out, S_last and z_last.
 */
void attentionMaskTypes()
{
    int32_t runs = 0;
    for (Act act : selectedActs())
    {
        for (AttentionDims d : {AttentionDims{32, 32, 70}, AttentionDims{16, 8, 9}, AttentionDims{32, 32, 1}})
        {
            AttentionConfig const c = paddedStatefulConfig(act, d, 2, runs % 2 == 1, MaskKind::kInt32);
            AttentionData const in = attentionData(c);
            checkMaskKindsAlike({"out", "S_last", "z_last"}, c.str(),
                [&](MaskKind kind)
                {
                    AttentionConfig other = c;
                    other.maskKind = kind;
                    return attentionOnePass(other, in);
                });
            ++runs;
        }
    }
    CHECK_EQ(runs, 3 * static_cast<int32_t>(selectedActs().size()));
}

/*
 * Prefill n tokens then single steps with the state fed back through two state buffers swapped after each call
 * (ping-pong, never in place: a call never writes the S / z it reads), against the reference over all L tokens,
 * with padding in both (each call gets its steps' slice of mask_pad):
 *   givenState: q, k, v, S0, z0, mask_pad with the model's state;
 *   otherwise:  prefill without given state, S0 / z0 bound as zeros (a second plugin instance, as a separate
 *               prefill engine would have), then the steps.
 */
void attentionPrefillThenStep(Act act, bool givenState)
{
    int32_t i = 0;
    for (int32_t D : {32, 64, 128})
    {
        AttentionConfig c{};
        c.act = act;
        c.B = randInt(1, 2);
        c.H = randInt(1, 3);
        c.L = randInt(70, 140);
        c.E = D;
        c.M = D;
        c.hasS0 = givenState;
        c.hasZ0 = givenState;
        c.timeMajor = i++ % 2 == (givenState ? 0 : 1);
        c.mask = true;
        c.maskKind = D == 64 ? MaskKind::kUint8 : MaskKind::kInt32;
        c.eps = 1e-6F;
        int32_t const n = c.L - randInt(3, 8);
        int32_t const QK = c.H * c.E, VO = c.H * c.M;
        size_t const es = elementSize(c.act);
        AttentionData in = attentionData(c);
        // Round q, k, v to the activation type in place; the per-call slices below are then encoded exactly.
        encode(in.q, act);
        encode(in.k, act);
        encode(in.v, act);
        auto const S0Bytes = encodeF32(in.S0);
        auto const z0Bytes = encodeF32(in.z0);
        std::vector<double> outRef, SRef, zRef;
        attentionReference(c, in, outRef, SRef, zRef);

        // The steps run with the state given either way.
        AttentionConfig stepConfig = c;
        stepConfig.hasS0 = true;
        stepConfig.hasZ0 = true;
        std::vector<PluginTensorDesc> inDesc, outDesc;
        attentionDescs(stepConfig, c.L, inDesc, outDesc);
        Fields fields = attentionParserFields(c);
        size_t workspaceBytes = 0;
        auto stepPlugin =
            buildThenDeserialize<plugin::CausalLinearAttentionPlugin, plugin::CausalLinearAttentionPluginCreator>(
                fields, inDesc, outDesc, workspaceBytes);
        std::unique_ptr<plugin::CausalLinearAttentionPlugin> prefillPlugin;
        if (!givenState)
        {
            attentionDescs(c, c.L, inDesc, outDesc);
            Fields prefillFields = attentionParserFields(c);
            size_t prefillWorkspace = 0;
            prefillPlugin =
                buildThenDeserialize<plugin::CausalLinearAttentionPlugin, plugin::CausalLinearAttentionPluginCreator>(
                    prefillFields, inDesc, outDesc, prefillWorkspace);
            workspaceBytes = std::max(workspaceBytes, prefillWorkspace);
        }
        DeviceBuffer workspace(std::max<size_t>(workspaceBytes, 16));
        DeviceBuffer SA = upload(S0Bytes);
        DeviceBuffer zA = upload(z0Bytes);
        DeviceBuffer SB(S0Bytes.size());
        DeviceBuffer zB(z0Bytes.size());
        void* S = SA.get();
        void* z = zA.get();
        void* SOther = SB.get();
        void* zOther = zB.get();
        std::vector<double> outAll(outRef.size(), NAN);
        Stream stream;
        int32_t t0 = 0;
        while (t0 < c.L)
        {
            int32_t const len = t0 == 0 ? n : 1;
            bool const first = t0 == 0;
            auto qPart = timeSlice(in.q, c.timeMajor, c.B, c.L, QK, t0, t0 + len);
            auto kPart = timeSlice(in.k, c.timeMajor, c.B, c.L, QK, t0, t0 + len);
            auto vPart = timeSlice(in.v, c.timeMajor, c.B, c.L, VO, t0, t0 + len);
            DeviceBuffer q = upload(encode(qPart, act));
            DeviceBuffer k = upload(encode(kPart, act));
            DeviceBuffer v = upload(encode(vPart, act));
            DeviceBuffer mask =
                upload(maskBytes(timeSlice(in.mask, c.timeMajor, c.B, c.L, 1, t0, t0 + len), c.maskKind));
            DeviceBuffer out(vPart.size() * es);
            bool const statefulCall = givenState || !first;
            attentionDescs(statefulCall ? stepConfig : c, len, inDesc, outDesc);
            // Without given state the prefill reads the zero state uploaded into S / z (the model gave none).
            std::vector<void const*> inPtr{q.get(), k.get(), v.get(), S, z, mask.get()};
            std::vector<void*> outPtr{out.get(), SOther, zOther};
            auto const SBefore = download(S, S0Bytes.size());
            auto const zBefore = download(z, z0Bytes.size());
            run(statefulCall ? *stepPlugin : *prefillPlugin, inDesc, outDesc, inPtr, outPtr, workspace.get(),
                stream.get());
            // The call read S / z and wrote SOther / zOther: the buffers it read are untouched.
            std::string const step = " read at token " + std::to_string(t0);
            CHECK_MSG(bitwiseEqual("S0" + step, download(S, S0Bytes.size()), SBefore));
            CHECK_MSG(bitwiseEqual("z0" + step, download(z, z0Bytes.size()), zBefore));
            std::swap(S, SOther);
            std::swap(z, zOther);
            timeScatter(outAll, decode(download(out.get(), out.bytes()), act), c.timeMajor, c.B, c.L, VO, t0, t0 + len);
            t0 += len;
        }
        std::string const what =
            c.str() + " prefill " + std::to_string(n) + (givenState ? " given state" : " zero state") + " ping-pong";
        CHECK_MSG(compare("out [" + what + "]", outAll, outRef, activationTolerance(act)));
        CHECK_MSG(compare(
            "S_last [" + what + "]", decodeF32(download(S, S0Bytes.size())), SRef, attentionStateTolerance(act, SRef)));
        CHECK_MSG(compare(
            "z_last [" + what + "]", decodeF32(download(z, z0Bytes.size())), zRef, attentionStateTolerance(act, zRef)));
    }
}

// ------------------------------------------------------------------------------------------------------------
// Test cases, in run order (each name also seeds the case's random stream).

test::Registrar const kTestCases[] = {
    {"CausalLinearAttention TensorRT node layouts: six inputs, state given or zeros, mask, both layouts",
        attentionNodeLayouts},
    {"CausalLinearAttention fp32 enqueue: head dims 32/64/128, state inputs, layouts, mask_pad, random shapes",
        forType(Act::kF32, attentionRandomShapes)},
    {"CausalLinearAttention fp16 enqueue: head dims 32/64/128, state inputs, layouts, mask_pad, random shapes",
        forType(Act::kF16, attentionRandomShapes)},
    {"CausalLinearAttention bf16 enqueue: head dims 32/64/128, state inputs, layouts, mask_pad, random shapes",
        forType(Act::kBF16, attentionRandomShapes)},
    {"CausalLinearAttention generic head dims and L=1 decode with mask_pad, all dtypes",
        forSelectedTypes(attentionGenericDims)},
    {"CausalLinearAttention mask_pad int32 (TensorRT's type), uint8 and bool give the same results",
        attentionMaskTypes},
    {"CausalLinearAttention prefill-then-step with mask_pad, state ping-pong (out of place), all dtypes",
        forSelectedTypes([](Act a) { attentionPrefillThenStep(a, true); })},
    {"CausalLinearAttention prefill without given state (S0 / z0 zeros) then ping-pong steps, all dtypes",
        forSelectedTypes([](Act a) { attentionPrefillThenStep(a, false); })},
};

} // namespace
