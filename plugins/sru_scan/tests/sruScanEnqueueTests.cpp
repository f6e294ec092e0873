/*
 * SRUScan plugin's enqueue on the real kernels (plugin_enqueue_gpu on a CUDA device, plugin_enqueue_emulated on the
 * CUDA host emulation) against a plain C++ reference of docs/ops.md (SRU scan); enqueueGpuTests.cpp says how the
 * cases walk a plugin through TensorRT's calls. Helpers: enqueueTestUtils.h.
 * Node layout: exactly six inputs (U, x, weight_c, bias, c0, mask_pad; x a 1-element NaN dummy unless
 * num_matrices = 3 with the skip term, mask_pad all false without padding); both directions, k = 3 / 4.
 */
#include "enqueueTestUtils.h"
#include "sru_scan/tests/sruScanTestUtils.h"

using namespace rnnx;
using namespace rnnx::test;

namespace
{

struct SruConfig
{
    int32_t L, B, d, D, k;
    //! mask: real padding; without it mask_pad is still an input, all false.
    bool skip, tanh, mask;
    MaskKind maskKind{MaskKind::kInt32};
    float scaleX;
    Act act;
    //! The value of the 1-element dummy bound at x when x is not read (NaN: a read would show).
    double dummyX{NAN};

    bool hasX() const
    {
        return k == 3 && skip;
    }
    int32_t width() const
    {
        return D * d;
    }
    std::string str() const
    {
        std::ostringstream s;
        s << name(act) << " L=" << L << " B=" << B << " d=" << d << " D=" << D << " k=" << k << " skip=" << skip
          << " tanh=" << tanh << " mask=" << (mask ? "padded " : "all-false ") << name(maskKind)
          << " scale_x=" << scaleX << (hasX() ? "" : " x=dummy(" + std::to_string(dummyX) + ")");
        return s.str();
    }
};

//! Host inputs, already rounded to their types.
struct SruData
{
    std::vector<double> U, x, w, b, c0;
    //! Pad flags (L, B), 1 = pad; bound as mask_pad in the case's MaskKind (maskBytes).
    std::vector<uint8_t> mask;
};

SruData sruData(SruConfig const& c)
{
    SruData in;
    size_t const LB = static_cast<size_t>(c.L) * c.B;
    in.U = randn(LB * c.width() * c.k, 1.0);
    in.x = randn(LB * c.width(), 1.0);
    in.w = randn(2 * static_cast<size_t>(c.width()), 0.5);
    in.b = randn(2 * static_cast<size_t>(c.width()), 0.5);
    in.c0 = randn(static_cast<size_t>(c.B) * c.width(), 1.0);
    in.mask.assign(LB, 0);
    if (c.mask)
    {
        for (int32_t b = 0; b < c.B; ++b)
        {
            int32_t const rightPad = randInt(0, std::min(c.L, 3));
            for (int32_t t = 0; t < c.L; ++t)
            {
                bool const pad = t >= c.L - rightPad || randInt(0, 9) == 0;
                in.mask[static_cast<size_t>(t) * c.B + b] = pad ? 1 : 0;
            }
        }
    }
    return in;
}

double sigmoid(double x)
{
    return 1.0 / (1.0 + std::exp(-x));
}

//! docs/ops.md "SRU scan", one time loop per (batch row, direction, unit), in fp64.
void sruReference(SruConfig const& c, SruData const& in, std::vector<double>& h, std::vector<double>& cLast)
{
    int32_t const W = c.width();
    h.assign(static_cast<size_t>(c.L) * c.B * W, 0.0);
    cLast.assign(static_cast<size_t>(c.B) * W, 0.0);
    for (int32_t b = 0; b < c.B; ++b)
    {
        for (int32_t dir = 0; dir < c.D; ++dir)
        {
            for (int32_t j = 0; j < c.d; ++j)
            {
                int32_t const col = dir * c.d + j;
                double const vf = in.w[col];
                double const vr = in.w[W + col];
                double const bf = in.b[col];
                double const br = in.b[W + col];
                double cell = in.c0[static_cast<size_t>(b) * W + col];
                for (int32_t s = 0; s < c.L; ++s)
                {
                    int32_t const t = dir == 0 ? s : c.L - 1 - s;
                    size_t const row = static_cast<size_t>(t) * c.B + b;
                    size_t const out = row * W + col;
                    if (c.mask && in.mask[row] != 0)
                    {
                        h[out] = 0.0;
                        continue;
                    }
                    double const* u = &in.U[(row * W + col) * c.k];
                    double const f = sigmoid(u[1] + vf * cell + bf);
                    double const r = sigmoid(u[2] + vr * cell + br);
                    cell = f * cell + (1.0 - f) * u[0];
                    double const g = c.tanh ? std::tanh(cell) : cell;
                    double value = r * g;
                    if (c.skip)
                    {
                        double const xPrime = c.k == 4 ? u[3] : c.scaleX * in.x[out];
                        value += (1.0 - r) * xPrime;
                    }
                    h[out] = value;
                }
                cLast[static_cast<size_t>(b) * W + col] = cell;
            }
        }
    }
}

Fields sruParserFields(SruConfig const& c)
{
    Fields f = sruFields(c.d, c.D, c.k, c.skip ? 1 : 0, c.tanh ? 1 : 0, c.scaleX);
    addParserExtras(f);
    return f;
}

//! Input / output descriptors for `length` steps: the TensorRT node's six inputs, U, x (the exporter's
//! 1-element dummy unless read), weight_c, bias, c0, mask_pad.
void sruDescs(SruConfig const& c, int32_t length, std::vector<PluginTensorDesc>& in, std::vector<PluginTensorDesc>& out)
{
    DataType const t = trtType(c.act);
    int32_t const W = c.width();
    in = {desc({length, c.B, W * c.k}, t), c.hasX() ? desc({length, c.B, W}, t) : desc({1}, t), desc({2 * W}, t),
        desc({2 * W}, t), desc({c.B, W}, DataType::kFLOAT), desc({length, c.B}, trtMaskType(c.maskKind))};
    out = {desc({length, c.B, W}, t), desc({c.B, W}, DataType::kFLOAT)};
}

//! Device copies of one SRU problem; time-major tensors, so steps [t0, t1) are pointer offsets.
struct SruDevice
{
    DeviceBuffer U, x, dummyX, w, b, c0, mask, h, cLast;
    std::vector<uint8_t> c0Bytes;

    SruDevice(SruConfig const& c, SruData& in)
    {
        U = upload(encode(in.U, c.act));
        x = upload(encode(in.x, c.act));
        std::vector<double> dummy{c.dummyX};
        dummyX = upload(encode(dummy, c.act));
        w = upload(encode(in.w, c.act));
        b = upload(encode(in.b, c.act));
        c0Bytes = encodeF32(in.c0);
        c0 = upload(c0Bytes);
        mask = upload(maskBytes(in.mask, c.maskKind));
        h = DeviceBuffer(static_cast<size_t>(c.L) * c.B * c.width() * elementSize(c.act));
        cLast = DeviceBuffer(c0Bytes.size());
    }

    //! Pointers for steps [t0, t0 + n); `state` is c0's buffer, `cOut` c_last's.
    void pointers(SruConfig const& c, int32_t t0, void* state, void* cOut, std::vector<void const*>& inPtr,
        std::vector<void*>& outPtr) const
    {
        size_t const es = elementSize(c.act);
        size_t const rowElems = static_cast<size_t>(t0) * c.B * c.width();
        inPtr = {byteOffset(U.get(), rowElems * c.k * es), c.hasX() ? byteOffset(x.get(), rowElems * es) : dummyX.get(),
            w.get(), b.get(), state,
            byteOffset(mask.get(), static_cast<size_t>(t0) * c.B * maskElementSize(c.maskKind))};
        outPtr = {byteOffset(h.get(), rowElems * es), cOut};
    }
};

Tolerance sruTolerance(Act a)
{
    double const t = a == Act::kF32 ? 1e-5 : a == Act::kF16 ? 2e-3 : 1.6e-2;
    return {t, t};
}

Tolerance const kSTATE_TOLERANCE{1e-4, 1e-4};

SruConfig randomSruConfig(Act act, int32_t D, int32_t k, bool skip, bool mask)
{
    SruConfig c{};
    c.act = act;
    c.D = D;
    c.k = k;
    c.skip = skip;
    c.mask = mask;
    c.maskKind = randomMaskKind();
    c.tanh = randInt(0, 1) == 1;
    c.scaleX = static_cast<float>(randu(1, 0.5, 1.5)[0]);
    int32_t const pick = randInt(0, 5);
    c.L = pick == 0 ? 1 : pick == 1 ? randInt(2, 4) : randInt(5, 90);
    c.B = randInt(1, 5);
    c.d = randInt(0, 3) == 0 ? randInt(1, 8) : randInt(9, 160);
    return c;
}

//! The SRUScan plugin for `c`, built then deserialised for all c.L steps (`inDesc` / `outDesc`: their
//! descriptors); it asks for no workspace.
std::unique_ptr<plugin::SruScanPlugin> sruPlugin(
    SruConfig const& c, std::vector<PluginTensorDesc>& inDesc, std::vector<PluginTensorDesc>& outDesc)
{
    sruDescs(c, c.L, inDesc, outDesc);
    Fields fields = sruParserFields(c);
    return buildWithoutWorkspace<plugin::SruScanPlugin, plugin::SruScanPluginCreator>(fields, inDesc, outDesc);
}

//! One SRU problem in a single enqueue, against the reference; returns h and c_last as bytes.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> sruOnePass(SruConfig const& c, SruData in)
{
    SruDevice dev(c, in);
    std::vector<double> hRef, cRef;
    sruReference(c, in, hRef, cRef);

    std::vector<PluginTensorDesc> inDesc, outDesc;
    auto plugin = sruPlugin(c, inDesc, outDesc);

    // Poison the outputs so a missing write shows.
    REQUIRE_CUDA(cudaMemset(dev.h.get(), 0xff, dev.h.bytes()));
    REQUIRE_CUDA(cudaMemset(dev.cLast.get(), 0xff, dev.cLast.bytes()));
    Stream stream;
    std::vector<void const*> inPtr;
    std::vector<void*> outPtr;
    dev.pointers(c, 0, dev.c0.get(), dev.cLast.get(), inPtr, outPtr);
    run(*plugin, inDesc, outDesc, inPtr, outPtr, nullptr, stream.get());

    auto hBytes = download(dev.h.get(), dev.h.bytes());
    auto cBytes = download(dev.cLast.get(), dev.cLast.bytes());
    CHECK_MSG(compare("h [" + c.str() + "]", decode(hBytes, c.act), hRef, sruTolerance(c.act)));
    CHECK_MSG(compare("c_last [" + c.str() + "]", decodeF32(cBytes), cRef, kSTATE_TOLERANCE));
    // c0 is an input: untouched when c_last has its own buffer.
    CHECK_MSG(bitwiseEqual(
        "c0 after an out-of-place run [" + c.str() + "]", download(dev.c0.get(), dev.c0.bytes()), dev.c0Bytes));
    return {std::move(hBytes), std::move(cBytes)};
}

void sruOnePass(SruConfig const& c)
{
    sruOnePass(c, sruData(c));
}

/*
 * Every SRUScan node the exporter emits for TensorRT (D = 1 / 2, k = 3 / 4, skip term on / off, tanh on / off,
 * with and without real padding), with exactly its six inputs. Where x is not read its binding is a 1-element
 * dummy: filled with NaN the result must match the reference, and equal bitwise the result with a zero dummy.
 */
void sruNodeLayouts()
{
    int32_t runs = 0;
    int32_t dummyRuns = 0;
    for (int32_t D : {1, 2})
    {
        for (int32_t k : {3, 4})
        {
            for (bool skip : {true, false})
            {
                for (bool tanh : {false, true})
                {
                    for (bool mask : {false, true})
                    {
                        std::vector<Act> const& acts = selectedActs();
                        SruConfig c = randomSruConfig(acts[runs % acts.size()], D, k, skip, mask);
                        c.tanh = tanh;
                        c.L = randInt(1, 12);
                        c.B = randInt(1, 4);
                        c.d = randInt(1, 24);
                        SruData const in = sruData(c);
                        auto const nanDummy = sruOnePass(c, in);
                        ++runs;
                        if (c.hasX())
                        {
                            continue;
                        }
                        SruConfig zero = c;
                        zero.dummyX = 0.0;
                        auto const zeroDummy = sruOnePass(zero, in);
                        CHECK_MSG(
                            bitwiseEqual("h, NaN vs zero dummy x [" + c.str() + "]", nanDummy.first, zeroDummy.first));
                        CHECK_MSG(bitwiseEqual(
                            "c_last, NaN vs zero dummy x [" + c.str() + "]", nanDummy.second, zeroDummy.second));
                        ++dummyRuns;
                    }
                }
            }
        }
    }
    CHECK_EQ(runs, 32);
    CHECK_EQ(dummyRuns, 24);
}

void sruRandomShapes(Act act)
{
    int32_t runs = 0;
    for (int32_t D : {1, 2})
    {
        for (int32_t k : {3, 4})
        {
            for (bool skip : {true, false})
            {
                for (bool mask : {false, true})
                {
                    sruOnePass(randomSruConfig(act, D, k, skip, mask));
                    ++runs;
                }
            }
        }
    }
    CHECK_EQ(runs, 16);
}

/*
 * The same SRU problems with mask_pad bound as int32 (what TensorRT gives the plugin), uint8 and bool: each matches
 * the reference, and the three give bitwise the same h and c_last. A mask of another type (fp32) is refused by
 * enqueue with one logged error, naming mask_pad.
 */
void sruMaskTypes()
{
    int32_t runs = 0;
    for (Act act : selectedActs())
    {
        for (int32_t D : {1, 2})
        {
            SruConfig c = randomSruConfig(act, D, D == 1 ? 3 : 4, true, true);
            c.L = randInt(9, 40);
            SruData const in = sruData(c);
            c.maskKind = MaskKind::kInt32;
            checkMaskKindsAlike({"h", "c_last"}, c.str(),
                [&](MaskKind kind)
                {
                    SruConfig other = c;
                    other.maskKind = kind;
                    auto const [h, cLast] = sruOnePass(other, in);
                    return std::vector<std::vector<uint8_t>>{h, cLast};
                });
            ++runs;
        }
    }
    CHECK_EQ(runs, 2 * static_cast<int32_t>(selectedActs().size()));

    SruConfig c = randomSruConfig(selectedActs()[0], 1, 3, true, true);
    SruData in = sruData(c);
    SruDevice dev(c, in);
    std::vector<PluginTensorDesc> inDesc, outDesc;
    auto plugin = sruPlugin(c, inDesc, outDesc);
    inDesc[5].type = DataType::kFLOAT;
    std::vector<void const*> inPtr;
    std::vector<void*> outPtr;
    dev.pointers(c, 0, dev.c0.get(), dev.cLast.get(), inPtr, outPtr);
    Stream stream;
    REQUIRE(plugin->onShapeChange(inDesc.data(), 6, outDesc.data(), 2) == 0);
    takeLoggedMessages();
    CHECK(plugin->enqueue(inDesc.data(), outDesc.data(), inPtr.data(), outPtr.data(), nullptr, stream.get()) != 0);
    CHECK_EQ(takeLoggedErrors(), 1);
    CHECK(takeLoggedMessages().find("mask_pad (input 5) must be int32") != std::string::npos);
}

//! Prefill n steps then single steps, c fed back through two buffers (ping-pong, never in place), against the
//! reference over all L steps and bitwise against one enqueue over all steps.
void sruPrefillThenStep(Act act)
{
    for (int32_t k : {3, 4})
    {
        SruConfig c = randomSruConfig(act, 1, k, randInt(0, 1) == 1, randInt(0, 1) == 1);
        c.L = randInt(8, 60);
        int32_t const n = randInt(1, c.L - 4);
        SruData in = sruData(c);
        SruDevice dev(c, in);
        std::vector<double> hRef, cRef;
        sruReference(c, in, hRef, cRef);

        std::vector<PluginTensorDesc> inDesc, outDesc;
        auto plugin = sruPlugin(c, inDesc, outDesc);
        Stream stream;

        // One pass over all steps (out of place).
        std::vector<void const*> inPtr;
        std::vector<void*> outPtr;
        dev.pointers(c, 0, dev.c0.get(), dev.cLast.get(), inPtr, outPtr);
        run(*plugin, inDesc, outDesc, inPtr, outPtr, nullptr, stream.get());
        auto const hAllBytes = download(dev.h.get(), dev.h.bytes());
        auto const cAllBytes = download(dev.cLast.get(), dev.cLast.bytes());

        // Prefill + steps into the same h buffer (poisoned first).
        REQUIRE_CUDA(cudaMemset(dev.h.get(), 0xff, dev.h.bytes()));
        DeviceBuffer stateA = upload(dev.c0Bytes);
        DeviceBuffer stateB(dev.c0Bytes.size());
        void* state = stateA.get();
        void* other = stateB.get();
        int32_t t0 = 0;
        while (t0 < c.L)
        {
            int32_t const len = t0 == 0 ? n : 1;
            sruDescs(c, len, inDesc, outDesc);
            auto const stateBefore = download(state, dev.c0Bytes.size());
            dev.pointers(c, t0, state, other, inPtr, outPtr);
            run(*plugin, inDesc, outDesc, inPtr, outPtr, nullptr, stream.get());
            // The call read `state` and wrote `other`: the buffer it read is untouched.
            CHECK_MSG(bitwiseEqual(
                "c0 read at step " + std::to_string(t0), download(state, dev.c0Bytes.size()), stateBefore));
            std::swap(state, other);
            t0 += len;
        }
        std::string const what = c.str() + " prefill " + std::to_string(n) + " ping-pong";
        auto const hBytes = download(dev.h.get(), dev.h.bytes());
        auto const cBytes = download(state, dev.c0Bytes.size());
        CHECK_MSG(compare("h [" + what + "]", decode(hBytes, c.act), hRef, sruTolerance(c.act)));
        CHECK_MSG(compare("c_last [" + what + "]", decodeF32(cBytes), cRef, kSTATE_TOLERANCE));
        CHECK_MSG(bitwiseEqual("h [" + what + "]", hBytes, hAllBytes));
        CHECK_MSG(bitwiseEqual("c_last [" + what + "]", cBytes, cAllBytes));
    }
}

// ------------------------------------------------------------------------------------------------------------
// Test cases, in run order (each name also seeds the case's random stream).

test::Registrar const kTestCases[] = {
    {"SRUScan TensorRT node layouts: six inputs for every variant, a NaN dummy x is never read", sruNodeLayouts},
    {"SRUScan fp32 enqueue: random shapes, D=1/2, k=3/4, skip, mask_pad", forType(Act::kF32, sruRandomShapes)},
    {"SRUScan fp16 enqueue: random shapes, D=1/2, k=3/4, skip, mask_pad", forType(Act::kF16, sruRandomShapes)},
    {"SRUScan bf16 enqueue: random shapes, D=1/2, k=3/4, skip, mask_pad", forType(Act::kBF16, sruRandomShapes)},
    {"SRUScan prefill-then-step, state ping-pong (out of place), all dtypes", forSelectedTypes(sruPrefillThenStep)},
    {"SRUScan mask_pad int32 (TensorRT's type), uint8 and bool give the same results; fp32 refused", sruMaskTypes},
};

} // namespace
