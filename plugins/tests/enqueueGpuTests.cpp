/*
 * plugin_enqueue_gpu: the plugins' enqueue on a real CUDA device against a plain C++ reference.
 *
 * Each case walks a plugin through the calls TensorRT makes: createPlugin (kBUILD) with the fields the ONNX
 * parser passes (INT -> kINT32, FLOAT -> kFLOAT32, plugin_version / plugin_namespace as kCHAR),
 * getOutputDataTypes, supportsFormatCombination, configurePlugin, getWorkspaceSize,
 * getFieldsToSerialize -> createPlugin (kRUNTIME) -> attachToContext, then onShapeChange + enqueue on a
 * cudaStream_t with cudaMalloc'ed buffers. The outputs are compared with naive loops of docs/ops.md written
 * here (fp64 accumulation, from the same rounded inputs), for random shapes, fp32 / fp16 / bf16 activations,
 * mask_pad (int32, what TensorRT hands the plugins; also bool and uint8 bound by hand, equal to int32) for both ops,
 * both directions, k = 3 / 4, head dims 32 / 64 / 128 (and generic ones), the attention's heads packed batch-first and
 * time-major, state the model did not give (zeros), and prefill-then-step with the state fed back through two buffers
 * (ping-pong, as the runtime binds it: the plugins declare no aliasing, so a call never writes the state buffer it
 * reads, which is checked). The kernels' in-place mode is tested on the kernels directly (tests/test_cuda_kernels*.py).
 *
 * Every call uses the TensorRT node layout the exporter emits: SRUScan with exactly six inputs (U, x, weight_c,
 * bias, c0, mask_pad; x a 1-element NaN dummy unless num_matrices = 3 with the skip term, mask_pad all false
 * without padding) and CausalLinearAttention with exactly six (q, k, v (B, L, H*.) or time-major (L, B, H*.), S0,
 * z0, mask_pad; S0 / z0 zeros when no state is given, mask_pad all false without padding), LinearRecurrence with
 * exactly seven (query, key, value, past_state, decay, beta, mask_pad; decay / beta NaN dummies for the rules that do
 * not read them, so a read shows) and CausalConvWithState with exactly five (input, weight, bias, past_state,
 * mask_pad). The recurrence family runs every rule, GQA, per-head / per-key decay, per-head / shared beta, head dims
 * up to 256, K 1..5 and every activation, in one call and as prefill-then-step with the state ping-ponged.
 *
 * Without a CUDA device (cudaGetDeviceCount fails or finds none) it prints a "SKIP ... no CUDA device" line
 * and exits with 77, ctest's SKIP_RETURN_CODE for this test. Otherwise it prints "N passed, N failed".
 * Arguments: [--dtype fp32|fp16|bf16[,...]] [FILTER]. --dtype limits the activation types (default all three):
 * the cases that loop over types run only those, a case written for one other type runs nothing, and the node
 * layout cases spread their configurations over the selected types (scripts/gpu_check.sh runs each type under
 * compute-sanitizer on its own). FILTER is a substring selecting test cases. RNNX_TEST_SEED sets the random seed.
 */
#include "testHarness.h"
#include "testUtils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <stdexcept>
#include <utility>

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;
using nvinfer1::PluginTensorDesc;

namespace rnnx
{
namespace test
{
namespace
{
void printingSink(nvinfer1::ILogger::Severity severity, char const* message)
{
    if (severity <= nvinfer1::ILogger::Severity::kERROR)
    {
        countLoggedError(message);
        std::cout << "  plugin error: " << message << "\n";
    }
}
} // namespace

} // namespace test
} // namespace rnnx

namespace
{

// ------------------------------------------------------------------------------------------------------------
// Helpers: CUDA checks, device buffers, activation types, random data, comparison.

#define REQUIRE_CUDA(expr)                                                                                             \
    do                                                                                                                 \
    {                                                                                                                  \
        cudaError_t const rnnxStatus_ = (expr);                                                                        \
        if (rnnxStatus_ != cudaSuccess)                                                                                \
        {                                                                                                              \
            ::rnnx::test::fail(__FILE__, __LINE__,                                                                     \
                std::string(#expr) + " -> " + cudaGetErrorName(rnnxStatus_) + ": " + cudaGetErrorString(rnnxStatus_)); \
            throw ::rnnx::test::AbortTestCase{};                                                                       \
        }                                                                                                              \
    } while (0)

//! Records a failure with `message` unless it is empty.
#define CHECK_MSG(message)                                                                                             \
    do                                                                                                                 \
    {                                                                                                                  \
        std::string const rnnxMsg_ = (message);                                                                        \
        if (!rnnxMsg_.empty())                                                                                         \
        {                                                                                                              \
            ::rnnx::test::fail(__FILE__, __LINE__, rnnxMsg_);                                                          \
        }                                                                                                              \
    } while (0)

class DeviceBuffer
{
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t bytes)
        : mBytes(bytes)
    {
        if (bytes > 0)
        {
            cudaError_t const status = cudaMalloc(&mPtr, bytes);
            if (status != cudaSuccess)
            {
                mPtr = nullptr;
                throw std::runtime_error(std::string("cudaMalloc: ") + cudaGetErrorString(status));
            }
        }
    }
    DeviceBuffer(DeviceBuffer const&) = delete;
    DeviceBuffer& operator=(DeviceBuffer const&) = delete;
    DeviceBuffer(DeviceBuffer&& other) noexcept
        : mPtr(other.mPtr)
        , mBytes(other.mBytes)
    {
        other.mPtr = nullptr;
        other.mBytes = 0;
    }
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept
    {
        std::swap(mPtr, other.mPtr);
        std::swap(mBytes, other.mBytes);
        return *this;
    }
    ~DeviceBuffer()
    {
        if (mPtr != nullptr)
        {
            cudaFree(mPtr);
        }
    }
    void* get() const
    {
        return mPtr;
    }
    size_t bytes() const
    {
        return mBytes;
    }

private:
    void* mPtr{nullptr};
    size_t mBytes{0};
};

DeviceBuffer upload(std::vector<uint8_t> const& host)
{
    DeviceBuffer buffer(host.size());
    REQUIRE_CUDA(cudaMemcpy(buffer.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    return buffer;
}

std::vector<uint8_t> download(void const* device, size_t bytes)
{
    std::vector<uint8_t> host(bytes);
    REQUIRE_CUDA(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
    return host;
}

//! Activation element type.
enum class Act
{
    kF32,
    kF16,
    kBF16
};

Act const kALL_ACTS[] = {Act::kF32, Act::kF16, Act::kBF16};

char const* name(Act a)
{
    return a == Act::kF32 ? "fp32" : a == Act::kF16 ? "fp16" : "bf16";
}

bool contains(std::vector<Act> const& acts, Act a)
{
    return std::find(acts.begin(), acts.end(), a) != acts.end();
}

//! The activation types of this run (--dtype; all three by default), in kALL_ACTS order.
std::vector<Act>& selectedActs()
{
    static std::vector<Act> acts(std::begin(kALL_ACTS), std::end(kALL_ACTS));
    return acts;
}

//! Parses --dtype's comma-separated list into selectedActs(); false (with a message) for an unknown or empty one.
bool selectActs(std::string const& list)
{
    std::vector<Act> chosen;
    std::istringstream in(list);
    std::string item;
    while (std::getline(in, item, ','))
    {
        auto const found =
            std::find_if(std::begin(kALL_ACTS), std::end(kALL_ACTS), [&item](Act a) { return item == name(a); });
        if (found == std::end(kALL_ACTS))
        {
            std::cout << "unknown --dtype '" << item << "' (expected fp32, fp16, bf16 or a comma-separated list)\n";
            return false;
        }
        chosen.push_back(*found);
    }
    std::vector<Act> ordered; // kALL_ACTS order, each type once
    for (Act candidate : kALL_ACTS)
    {
        if (contains(chosen, candidate))
        {
            ordered.push_back(candidate);
        }
    }
    if (ordered.empty())
    {
        std::cout << "--dtype needs at least one of fp32, fp16, bf16\n";
        return false;
    }
    selectedActs() = ordered;
    return true;
}

DataType trtType(Act a)
{
    return a == Act::kF32 ? DataType::kFLOAT : a == Act::kF16 ? DataType::kHALF : DataType::kBF16;
}

size_t elementSize(Act a)
{
    return a == Act::kF32 ? 4 : 2;
}

//! Rounds every value to the activation type in place and returns the encoded bytes.
std::vector<uint8_t> encode(std::vector<double>& values, Act a)
{
    std::vector<uint8_t> bytes(values.size() * elementSize(a));
    for (size_t i = 0; i < values.size(); ++i)
    {
        float const f = static_cast<float>(values[i]);
        if (a == Act::kF32)
        {
            std::memcpy(&bytes[4 * i], &f, 4);
            values[i] = f;
        }
        else if (a == Act::kF16)
        {
            __half const h = __float2half_rn(f);
            std::memcpy(&bytes[2 * i], &h, 2);
            values[i] = __half2float(h);
        }
        else
        {
            __nv_bfloat16 const b = __float2bfloat16_rn(f);
            std::memcpy(&bytes[2 * i], &b, 2);
            values[i] = __bfloat162float(b);
        }
    }
    return bytes;
}

std::vector<double> decode(std::vector<uint8_t> const& bytes, Act a)
{
    size_t const n = bytes.size() / elementSize(a);
    std::vector<double> values(n);
    for (size_t i = 0; i < n; ++i)
    {
        if (a == Act::kF32)
        {
            float f;
            std::memcpy(&f, &bytes[4 * i], 4);
            values[i] = f;
        }
        else if (a == Act::kF16)
        {
            __half h;
            std::memcpy(&h, &bytes[2 * i], 2);
            values[i] = __half2float(h);
        }
        else
        {
            __nv_bfloat16 b;
            std::memcpy(&b, &bytes[2 * i], 2);
            values[i] = __bfloat162float(b);
        }
    }
    return values;
}

//! fp32 state: rounds in place, returns the bytes.
std::vector<uint8_t> encodeF32(std::vector<double>& values)
{
    return encode(values, Act::kF32);
}

std::vector<double> decodeF32(std::vector<uint8_t> const& bytes)
{
    return decode(bytes, Act::kF32);
}

std::mt19937_64& rng()
{
    static std::mt19937_64 engine;
    return engine;
}

int32_t randInt(int32_t lo, int32_t hi)
{
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng());
}

std::vector<double> randn(size_t n, double scale)
{
    std::normal_distribution<double> dist(0.0, scale);
    std::vector<double> v(n);
    for (double& x : v)
    {
        x = dist(rng());
    }
    return v;
}

std::vector<double> randu(size_t n, double lo, double hi)
{
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(n);
    for (double& x : v)
    {
        x = dist(rng());
    }
    return v;
}

struct Tolerance
{
    double atol;
    double rtol;
};

//! "" when |got - ref| <= atol + rtol * |ref| everywhere (and nothing is NaN), else a description of the worst.
std::string compare(
    std::string const& what, std::vector<double> const& got, std::vector<double> const& ref, Tolerance tol)
{
    if (got.size() != ref.size())
    {
        return what + ": size " + std::to_string(got.size()) + " vs reference " + std::to_string(ref.size());
    }
    size_t bad = 0;
    size_t worst = 0;
    double worstExcess = -1.0;
    for (size_t i = 0; i < got.size(); ++i)
    {
        double const limit = tol.atol + tol.rtol * std::fabs(ref[i]);
        double const err = std::fabs(got[i] - ref[i]);
        bool const ok = std::isfinite(got[i]) && err <= limit;
        double const excess = std::isfinite(got[i]) ? err - limit : INFINITY;
        if (!ok)
        {
            ++bad;
        }
        if (excess > worstExcess || (!ok && bad == 1))
        {
            worstExcess = excess;
            worst = i;
        }
    }
    if (bad == 0)
    {
        return "";
    }
    std::ostringstream out;
    out.precision(8);
    out << what << ": " << bad << " of " << got.size() << " elements off (atol " << tol.atol << ", rtol " << tol.rtol
        << "); worst at flat index " << worst << ": got " << got[worst] << ", reference " << ref[worst];
    return out.str();
}

std::string bitwiseEqual(std::string const& what, std::vector<uint8_t> const& a, std::vector<uint8_t> const& b)
{
    if (a == b)
    {
        return "";
    }
    return what + ": not bitwise equal to the one-pass run";
}

double maxAbs(std::vector<double> const& v)
{
    double m = 0.0;
    for (double x : v)
    {
        m = std::max(m, std::fabs(x));
    }
    return m;
}

//! The ONNX parser's fields: attributes (INT as kINT32, FLOAT as kFLOAT32) plus plugin_version / _namespace.
void addParserExtras(Fields& f)
{
    f.str("plugin_version", "2").str("plugin_namespace", "rnnx");
}

//! Build phase (types, formats, configure, workspace), then serialise -> deserialise -> attach, as TensorRT
//! does; returns the plugin that runs. `workspace` reports the build plugin's answer.
template <typename Plugin, typename Creator>
std::unique_ptr<Plugin> buildThenDeserialize(Fields& fields, std::vector<PluginTensorDesc> const& in,
    std::vector<PluginTensorDesc> const& out, size_t& workspace)
{
    Creator creator;
    auto build = createAs<Plugin>(creator, fields.get(), nvinfer1::TensorRTPhase::kBUILD);
    REQUIRE(build != nullptr);
    auto const nIn = static_cast<int32_t>(in.size());
    auto const nOut = static_cast<int32_t>(out.size());
    REQUIRE(build->getNbOutputs() == nOut);
    std::vector<DataType> inTypes;
    for (auto const& d : in)
    {
        inTypes.push_back(d.type);
    }
    std::vector<DataType> outTypes(out.size());
    REQUIRE(build->getOutputDataTypes(outTypes.data(), nOut, inTypes.data(), nIn) == 0);
    for (int32_t i = 0; i < nOut; ++i)
    {
        CHECK(outTypes[i] == out[i].type);
    }
    std::vector<nvinfer1::DynamicPluginTensorDesc> dyn;
    for (auto const& d : in)
    {
        dyn.push_back(dynDesc(d));
    }
    for (auto const& d : out)
    {
        dyn.push_back(dynDesc(d));
    }
    for (int32_t pos = 0; pos < nIn + nOut; ++pos)
    {
        // Every descriptor is supported but a bool / uint8 mask_pad (only a mask takes these types here): TensorRT
        // has no bool / uint8 plugin tensors, so the plugins advertise int32 masks only. A case binding a byte mask
        // goes on as a caller other than TensorRT would; enqueue reads it as bytes.
        bool const byteMask = pos < nIn && (in[pos].type == DataType::kBOOL || in[pos].type == DataType::kUINT8);
        CHECK(build->supportsFormatCombination(pos, dyn.data(), nIn, nOut) == !byteMask);
    }
    REQUIRE(build->configurePlugin(dyn.data(), nIn, dyn.data() + nIn, nOut) == 0);
    workspace = build->getWorkspaceSize(dyn.data(), nIn, dyn.data() + nIn, nOut);
    nvinfer1::PluginFieldCollection const* serialized = build->getFieldsToSerialize();
    REQUIRE(serialized != nullptr);
    auto runtime = createAs<Plugin>(creator, serialized, nvinfer1::TensorRTPhase::kRUNTIME);
    REQUIRE(runtime != nullptr);
    std::unique_ptr<Plugin> attached(static_cast<Plugin*>(runtime->attachToContext(nullptr)));
    REQUIRE(attached != nullptr);
    return attached;
}

//! onShapeChange + enqueue + synchronise.
template <typename Plugin>
void run(Plugin& plugin, std::vector<PluginTensorDesc> const& in, std::vector<PluginTensorDesc> const& out,
    std::vector<void const*> const& inPtr, std::vector<void*> const& outPtr, void* workspace, cudaStream_t stream)
{
    REQUIRE(
        plugin.onShapeChange(in.data(), static_cast<int32_t>(in.size()), out.data(), static_cast<int32_t>(out.size()))
        == 0);
    REQUIRE(plugin.enqueue(in.data(), out.data(), inPtr.data(), outPtr.data(), workspace, stream) == 0);
    REQUIRE_CUDA(cudaStreamSynchronize(stream));
    REQUIRE_CUDA(cudaGetLastError());
}

class Stream
{
public:
    Stream()
    {
        if (cudaStreamCreateWithFlags(&mStream, cudaStreamNonBlocking) != cudaSuccess)
        {
            throw std::runtime_error("cudaStreamCreate failed");
        }
    }
    ~Stream()
    {
        cudaStreamDestroy(mStream);
    }
    Stream(Stream const&) = delete;
    Stream& operator=(Stream const&) = delete;
    cudaStream_t get() const
    {
        return mStream;
    }

private:
    cudaStream_t mStream{};
};

void* byteOffset(void* base, size_t bytes)
{
    return static_cast<uint8_t*>(base) + bytes;
}

//! The element type a case binds mask_pad in. TensorRT hands the plugins int32 only (supportsFormatCombination
//! refuses bool / uint8: TensorRT has no such plugin tensors); bool / uint8 are bound by hand here, as a caller
//! other than TensorRT could, and must give the same results.
enum class MaskKind
{
    kInt32,
    kUint8,
    kBool
};

char const* name(MaskKind m)
{
    return m == MaskKind::kInt32 ? "int32" : m == MaskKind::kUint8 ? "uint8" : "bool";
}

DataType trtMaskType(MaskKind m)
{
    return m == MaskKind::kInt32 ? DataType::kINT32 : m == MaskKind::kUint8 ? DataType::kUINT8 : DataType::kBOOL;
}

size_t maskElementSize(MaskKind m)
{
    return m == MaskKind::kInt32 ? 4 : 1;
}

MaskKind randomMaskKind()
{
    return static_cast<MaskKind>(randInt(0, 2));
}

//! Pad flags (non-zero = pad) as mask_pad bytes of `kind`. A pad is never just 1 where the type allows more: uint8
//! pads are 1..255, int32 pads include values whose low bytes are all zero (256, 65536, 2^24, INT32_MIN) and -1, so
//! a kernel reading int32 as bytes, or only an element's low byte, misses pads.
std::vector<uint8_t> maskBytes(std::vector<uint8_t> const& pads, MaskKind kind)
{
    static int32_t const kInt32Pads[] = {1, 256, 65536, 1 << 24, -1, INT32_MIN, 7};
    std::vector<uint8_t> bytes(pads.size() * maskElementSize(kind), 0);
    for (size_t i = 0; i < pads.size(); ++i)
    {
        if (pads[i] == 0)
        {
            continue;
        }
        switch (kind)
        {
        case MaskKind::kInt32:
        {
            int32_t const value = kInt32Pads[i % (sizeof(kInt32Pads) / sizeof(kInt32Pads[0]))];
            std::memcpy(&bytes[i * 4], &value, 4);
            break;
        }
        case MaskKind::kUint8: bytes[i] = static_cast<uint8_t>(1 + (i * 37) % 255); break;
        case MaskKind::kBool: bytes[i] = 1; break;
        }
    }
    return bytes;
}

// ------------------------------------------------------------------------------------------------------------
// SRU scan: reference and cases.

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
    size_t workspace = 0;
    auto plugin =
        buildThenDeserialize<plugin::SruScanPlugin, plugin::SruScanPluginCreator>(fields, inDesc, outDesc, workspace);
    CHECK_EQ(workspace, size_t{0});
    return plugin;
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
            auto const int32Result = sruOnePass(c, in);
            for (MaskKind kind : {MaskKind::kUint8, MaskKind::kBool})
            {
                SruConfig other = c;
                other.maskKind = kind;
                auto const result = sruOnePass(other, in);
                std::string const what = std::string(", int32 vs ") + name(kind) + " mask [" + c.str() + "]";
                CHECK_MSG(bitwiseEqual("h" + what, int32Result.first, result.first));
                CHECK_MSG(bitwiseEqual("c_last" + what, int32Result.second, result.second));
            }
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
// Causal linear attention: reference and cases.

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

Tolerance attentionTolerance(Act a)
{
    return a == Act::kF32 ? Tolerance{1e-4, 1e-4} : a == Act::kF16 ? Tolerance{1e-2, 1e-2} : Tolerance{6e-2, 3e-2};
}

//! State tolerance, relative to the state's magnitude (the test_cuda_kernels.py convention).
Tolerance attentionStateTolerance(Act a, std::vector<double> const& ref)
{
    double const rtol = attentionTolerance(a).rtol;
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
        "out [" + c.str() + "]", decode(download(out.get(), out.bytes()), c.act), outRef, attentionTolerance(c.act)));
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

//! Head dims 32 / 64 / 128 (chunked prefill; L = 1 decode), every state-input variant, both layouts, padding or
//! not, random B, H, L.
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

//! Other head dims (the per-token decode kernel for every L) and L = 1 with state, padding and both layouts.
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
 * the chunked prefill (E = M = 32, L > 64), the per-token kernel (E = 16, M = 8) and L = 1 decode, both layouts:
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
            auto const int32Result = attentionOnePass(c, in);
            for (MaskKind kind : {MaskKind::kUint8, MaskKind::kBool})
            {
                AttentionConfig other = c;
                other.maskKind = kind;
                auto const result = attentionOnePass(other, in);
                std::string const what = std::string(", int32 vs ") + name(kind) + " mask [" + c.str() + "]";
                CHECK_MSG(bitwiseEqual("out" + what, int32Result[0], result[0]));
                CHECK_MSG(bitwiseEqual("S_last" + what, int32Result[1], result[1]));
                CHECK_MSG(bitwiseEqual("z_last" + what, int32Result[2], result[2]));
            }
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
        CHECK_MSG(compare("out [" + what + "]", outAll, outRef, attentionTolerance(act)));
        CHECK_MSG(compare(
            "S_last [" + what + "]", decodeF32(download(S, S0Bytes.size())), SRef, attentionStateTolerance(act, SRef)));
        CHECK_MSG(compare(
            "z_last [" + what + "]", decodeF32(download(z, z0Bytes.size())), zRef, attentionStateTolerance(act, zRef)));
    }
}

// ------------------------------------------------------------------------------------------------------------
// Linear recurrence: reference and cases.

//! x (B, T, W) -> its steps [t0, t1) as (B, t1 - t0, W).
std::vector<double> sliceSteps(std::vector<double> const& x, int32_t B, int32_t T, int32_t W, int32_t t0, int32_t t1)
{
    std::vector<double> out;
    out.reserve(static_cast<size_t>(B) * (t1 - t0) * W);
    for (int32_t b = 0; b < B; ++b)
    {
        out.insert(out.end(), x.begin() + (static_cast<size_t>(b) * T + t0) * W,
            x.begin() + (static_cast<size_t>(b) * T + t1) * W);
    }
    return out;
}

//! The inverse of sliceSteps: writes `part` (B, t1 - t0, W) into x (B, T, W).
void scatterSteps(
    std::vector<double>& x, std::vector<double> const& part, int32_t B, int32_t T, int32_t W, int32_t t0, int32_t t1)
{
    for (int32_t b = 0; b < B; ++b)
    {
        std::copy(part.begin() + static_cast<size_t>(b) * (t1 - t0) * W,
            part.begin() + static_cast<size_t>(b + 1) * (t1 - t0) * W,
            x.begin() + (static_cast<size_t>(b) * T + t0) * W);
    }
}

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
            << (mask ? " mask" : "") << (givenState ? " state" : " zero state");
        return out.str();
    }
};

struct RecurrenceData
{
    std::vector<double> q, k, v, S0, decay, beta;
    std::vector<uint8_t> pads;
};

//! Random inputs, rounded to their types: keys of unit norm per head (as the delta rules expect), decay in log space
//! in [-1, 0), beta in (0, 1); decay / beta NaN dummies for the rules that do not read them (a read shows as NaN).
RecurrenceData recurrenceData(RecurrenceConfig const& c)
{
    RecurrenceData d;
    size_t const BT = static_cast<size_t>(c.B) * c.T;
    d.q = randn(BT * c.Hq * c.dk, 1.0);
    d.k = randn(BT * c.Hkv * c.dk, 1.0);
    for (size_t head = 0; head < BT * c.Hkv; ++head)
    {
        double norm = 0.0;
        for (int32_t e = 0; e < c.dk; ++e)
        {
            norm += d.k[head * c.dk + e] * d.k[head * c.dk + e];
        }
        for (int32_t e = 0; e < c.dk; ++e)
        {
            d.k[head * c.dk + e] /= std::sqrt(norm) + 1e-6;
        }
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
//! o_t = scale * S_t^T q_t for every query head of the group.
void recurrenceReference(
    RecurrenceConfig const& c, RecurrenceData const& in, std::vector<double>& out, std::vector<double>& SLast)
{
    int32_t const G = c.Hq / c.Hkv;
    double const scale = c.scale != 0.F ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.dk));
    out.assign(static_cast<size_t>(c.B) * c.T * c.Hq * c.dv, 0.0);
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
                    double const* k = &in.k[(bt * c.Hkv + j) * c.dk];
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
                    int32_t const h = j * G + g;
                    double const* q = &in.q[(bt * c.Hq + h) * c.dk];
                    for (int32_t m = 0; m < c.dv; ++m)
                    {
                        double o = 0.0;
                        for (int32_t e = 0; e < c.dk; ++e)
                        {
                            o += S[e * c.dv + m] * q[e];
                        }
                        out[(bt * c.Hq + h) * c.dv + m] = scale * o;
                    }
                }
            }
        }
    }
}

Tolerance recurrenceTolerance(Act a, std::vector<double> const& ref)
{
    Tolerance const t = attentionTolerance(a);
    return {t.atol * (maxAbs(ref) + 1.0), t.rtol};
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
    Fields fields = recurrenceFields(c.Hq, c.Hkv, kRULES[c.rule], c.scale);
    addParserExtras(fields);
    auto const descs = [&](int32_t len, std::vector<PluginTensorDesc>& inDesc, std::vector<PluginTensorDesc>& outDesc)
    {
        inDesc = {desc({c.B, len, c.Hq * c.dk}, t), desc({c.B, len, c.Hkv * c.dk}, t),
            desc({c.B, len, c.Hkv * c.dv}, t), desc({c.B, c.Hkv, c.dk, c.dv}, DataType::kFLOAT),
            desc({c.B, len, c.decayWidth()}, t), desc({c.B, len, c.betaWidth()}, t),
            desc({c.B, len}, trtMaskType(maskKind))};
        outDesc = {desc({c.B, len, c.Hq * c.dv}, t), desc({c.B, c.Hkv, c.dk, c.dv}, DataType::kFLOAT)};
    };
    std::vector<PluginTensorDesc> inDesc, outDesc;
    descs(c.T, inDesc, outDesc);
    size_t workspace = 1;
    auto plugin = buildThenDeserialize<plugin::LinearRecurrencePlugin, plugin::LinearRecurrencePluginCreator>(
        fields, inDesc, outDesc, workspace);
    CHECK_EQ(workspace, size_t{0});
    std::vector<double> S0 = in.S0;
    DeviceBuffer stateA = upload(encodeF32(S0));
    DeviceBuffer stateB(stateA.bytes());
    void* S = stateA.get();
    void* SOther = stateB.get();
    std::vector<double> outAll(outRef.size(), NAN);
    Stream stream;
    for (int32_t t0 = 0; t0 < c.T;)
    {
        int32_t const len = t0 == 0 ? std::min(std::max(prefill, 1), c.T) : 1;
        int32_t const t1 = t0 + len;
        descs(len, inDesc, outDesc);
        auto const part = [&](std::vector<double> const& x, int32_t W)
        {
            std::vector<double> slice = sliceSteps(x, c.B, c.T, W, t0, t1);
            return upload(encode(slice, c.act));
        };
        DeviceBuffer q = part(in.q, c.Hq * c.dk), k = part(in.k, c.Hkv * c.dk), v = part(in.v, c.Hkv * c.dv);
        DeviceBuffer decay = part(in.decay, c.decayWidth()), beta = part(in.beta, c.betaWidth());
        std::vector<uint8_t> pads;
        for (int32_t b = 0; b < c.B; ++b)
        {
            pads.insert(pads.end(), in.pads.begin() + static_cast<size_t>(b) * c.T + t0,
                in.pads.begin() + static_cast<size_t>(b) * c.T + t1);
        }
        DeviceBuffer mask = upload(maskBytes(pads, maskKind));
        DeviceBuffer out(static_cast<size_t>(c.B) * len * c.Hq * c.dv * elementSize(c.act));
        std::vector<uint8_t> const before = download(S, stateA.bytes());
        run(*plugin, inDesc, outDesc, {q.get(), k.get(), v.get(), S, decay.get(), beta.get(), mask.get()},
            {out.get(), SOther}, nullptr, stream.get());
        CHECK_MSG(bitwiseEqual("past_state read at step " + std::to_string(t0), download(S, stateA.bytes()), before));
        scatterSteps(outAll, decode(download(out.get(), out.bytes()), c.act), c.B, c.T, c.Hq * c.dv, t0, t1);
        std::swap(S, SOther);
        t0 = t1;
    }
    std::string const what = " [" + c.str() + ", prefill " + std::to_string(prefill) + ", " + name(maskKind) + " mask]";
    CHECK_MSG(compare("output" + what, outAll, outRef, recurrenceTolerance(c.act, outRef)));
    CHECK_MSG(compare(
        "present_state" + what, decodeF32(download(S, stateA.bytes())), SRef, recurrenceTolerance(Act::kF32, SRef)));
}

//! Every rule, GQA groups 1 / 2 / 4, decay per head / per key, beta per head / shared, head dims 16..128 (and odd
//! ones), given scale or 1/sqrt(d_k), with and without mask and state; one call, then prefill + steps.
void recurrenceRandomShapes(Act act)
{
    for (int32_t rule = 0; rule < 4; ++rule)
    {
        for (int32_t variant = 0; variant < 3; ++variant)
        {
            RecurrenceConfig c;
            c.act = act;
            c.rule = rule;
            c.B = randInt(1, 2);
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
            recurrenceCase(c, c.T);
            recurrenceCase(c, randInt(1, c.T));
        }
    }
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

// ------------------------------------------------------------------------------------------------------------
// Causal convolution with state: reference and cases.

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
    size_t workspace = 1;
    auto plugin = buildThenDeserialize<plugin::CausalConvWithStatePlugin, plugin::CausalConvWithStatePluginCreator>(
        fields, inDesc, outDesc, workspace);
    CHECK_EQ(workspace, size_t{0});
    DeviceBuffer weight = upload(wBytes), biasBuffer = upload(biasBytes);
    DeviceBuffer stateA = upload(S0Bytes);
    // K = 1: an empty state, still two distinct (empty) bindings.
    DeviceBuffer stateB(stateA.bytes());
    void* S = stateA.get();
    void* SOther = stateB.get();
    std::vector<double> outAll(outRef.size(), NAN);
    Stream stream;
    for (int32_t t0 = 0; t0 < c.T;)
    {
        int32_t const len = t0 == 0 ? std::min(std::max(prefill, 1), c.T) : 1;
        int32_t const t1 = t0 + len;
        descs(len, inDesc, outDesc);
        // input (B, C, T) is (B*C, T, 1) step-sliced.
        std::vector<double> xPart = sliceSteps(x, static_cast<int32_t>(rows), c.T, 1, t0, t1);
        DeviceBuffer input = upload(encode(xPart, c.act));
        std::vector<uint8_t> pads01;
        for (int32_t b = 0; b < c.B; ++b)
        {
            pads01.insert(pads01.end(), pads.begin() + static_cast<size_t>(b) * c.T + t0,
                pads.begin() + static_cast<size_t>(b) * c.T + t1);
        }
        DeviceBuffer mask = upload(maskBytes(pads01, MaskKind::kInt32));
        DeviceBuffer out(rows * len * elementSize(c.act));
        std::vector<uint8_t> const before = download(S, stateA.bytes());
        run(*plugin, inDesc, outDesc, {input.get(), weight.get(), biasBuffer.get(), S, mask.get()}, {out.get(), SOther},
            nullptr, stream.get());
        CHECK_MSG(bitwiseEqual("past_state read at step " + std::to_string(t0), download(S, stateA.bytes()), before));
        scatterSteps(
            outAll, decode(download(out.get(), out.bytes()), c.act), static_cast<int32_t>(rows), c.T, 1, t0, t1);
        std::swap(S, SOther);
        t0 = t1;
    }
    std::string const what = " [" + c.str() + ", prefill " + std::to_string(prefill) + "]";
    CHECK_MSG(compare("output" + what, outAll, outRef, recurrenceTolerance(c.act, outRef)));
    // The state holds past inputs (already of the activation type): exact.
    CHECK_MSG(compare("present_state" + what, decodeF32(download(S, stateA.bytes())), SRef, Tolerance{0.0, 0.0}));
}

//! K 1..5, every activation, mask, state given or zeros; one call, then prefill + steps.
void convRandomShapes(Act act)
{
    for (int32_t K = 1; K <= 5; ++K)
    {
        for (int32_t activation = 0; activation < 3; ++activation)
        {
            ConvConfig c;
            c.act = act;
            c.B = randInt(1, 3);
            c.C = randInt(1, 70);
            c.T = randInt(1, 30);
            c.K = K;
            c.activation = activation;
            c.mask = (K + activation) % 2 == 0;
            c.givenState = activation != 2;
            convCase(c, c.T);
            convCase(c, randInt(1, c.T));
        }
    }
}

//! A case written for the type `a` alone: runs `test` when --dtype selected `a`, else nothing.
std::function<void()> forType(Act a, void (*test)(Act))
{
    return [a, test]
    {
        if (contains(selectedActs(), a))
        {
            test(a);
        }
    };
}

//! A case written for all types: runs `test` for each type --dtype selected.
std::function<void()> forSelectedTypes(void (*test)(Act))
{
    return [test]
    {
        for (Act a : selectedActs())
        {
            test(a);
        }
    };
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
    {"LinearRecurrence enqueue: every rule, GQA, decay per head / per key, beta per head / shared, mask, state, "
     "one call and prefill-then-step (ping-pong), all dtypes",
        forSelectedTypes(recurrenceRandomShapes)},
    {"LinearRecurrence head dims 256; mask_pad int32, uint8 and bool alike", recurrenceLimitsAndMasks},
    {"CausalConvWithState enqueue: K 1..5, none / silu / swish, mask, state, one call and prefill-then-step, all "
     "dtypes",
        forSelectedTypes(convRandomShapes)},
};

} // namespace

int main(int argc, char** argv)
{
    char const* filter = nullptr;
    for (int i = 1; i < argc; ++i)
    {
        std::string const arg = argv[i];
        if (arg == "--dtype" || arg.rfind("--dtype=", 0) == 0)
        {
            bool const inlineValue = arg.size() > 7;
            if (!inlineValue && i + 1 >= argc)
            {
                std::cout << "--dtype needs a value: fp32, fp16, bf16 or a comma-separated list\n";
                return 2;
            }
            if (!selectActs(inlineValue ? arg.substr(8) : std::string(argv[++i])))
            {
                return 2;
            }
        }
        else if (filter == nullptr && arg.rfind("--", 0) != 0)
        {
            filter = argv[i];
        }
        else
        {
            std::cout << "usage: plugin_enqueue_gpu [--dtype fp32|fp16|bf16[,...]] [FILTER]\n";
            return 2;
        }
    }
    int deviceCount = 0;
    cudaError_t const status = cudaGetDeviceCount(&deviceCount);
    if (status != cudaSuccess || deviceCount == 0)
    {
        std::cout << "SKIP plugin_enqueue_gpu: no CUDA device ("
                  << (status != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": "
                                 + cudaGetErrorString(status)
                                            : std::string("cudaGetDeviceCount found 0 devices"))
                  << ")\n";
        return 77;
    }
    cudaDeviceProp prop{};
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
    {
        std::cout << "cannot use CUDA device 0\n";
        return 1;
    }
    uint64_t seed = 20240611;
    if (char const* env = std::getenv("RNNX_TEST_SEED"))
    {
        seed = std::strtoull(env, nullptr, 10);
    }
    std::cout << "device 0: " << prop.name << " (sm_" << prop.major << prop.minor << "), seed " << seed << "\n";
    std::cout << "activation types:";
    for (Act a : selectedActs())
    {
        std::cout << " " << name(a);
    }
    std::cout << (selectedActs().size() < 3 ? " (a case written for another type runs nothing)\n" : "\n");

    plugin::setLogSink(&test::printingSink);
    // Each case draws from its own stream of the seed, so a filter reproduces the full run's data.
    auto const seedCase = [seed](test::TestCase const& testCase)
    { rng().seed(seed + std::hash<std::string>{}(testCase.name)); };
    return test::runTestCases(filter, seedCase, /*failOnLoggedErrors=*/true);
}
