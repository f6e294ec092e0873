/*
 * Helpers of the plugins' enqueue tests (plugin_enqueue_gpu / plugin_enqueue_emulated, main in enqueueGpuTests.cpp;
 * each op's cases in plugins/<op>/tests/<opCamel>EnqueueTests.cpp): CUDA checks, device buffers, activation types
 * and their encodings, random data, comparison with tolerances, mask kinds, and the walk of a plugin through the
 * calls TensorRT makes (buildThenDeserialize, run).
 */
#pragma once

#include "testHarness.h"
#include "testUtils.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rnnx
{
namespace test
{

using nvinfer1::DataType;
using nvinfer1::PluginTensorDesc;

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

inline DeviceBuffer upload(std::vector<uint8_t> const& host)
{
    DeviceBuffer buffer(host.size());
    REQUIRE_CUDA(cudaMemcpy(buffer.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
    return buffer;
}

inline std::vector<uint8_t> download(void const* device, size_t bytes)
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

inline Act const kALL_ACTS[] = {Act::kF32, Act::kF16, Act::kBF16};

inline char const* name(Act a)
{
    return a == Act::kF32 ? "fp32" : a == Act::kF16 ? "fp16" : "bf16";
}

inline bool contains(std::vector<Act> const& acts, Act a)
{
    return std::find(acts.begin(), acts.end(), a) != acts.end();
}

//! The activation types of this run (--dtype; all three by default), in kALL_ACTS order.
inline std::vector<Act>& selectedActs()
{
    static std::vector<Act> acts(std::begin(kALL_ACTS), std::end(kALL_ACTS));
    return acts;
}

//! Parses --dtype's comma-separated list into selectedActs(); false (with a message) for an unknown or empty one.
inline bool selectActs(std::string const& list)
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

inline DataType trtType(Act a)
{
    return a == Act::kF32 ? DataType::kFLOAT : a == Act::kF16 ? DataType::kHALF : DataType::kBF16;
}

inline size_t elementSize(Act a)
{
    return a == Act::kF32 ? 4 : 2;
}

//! Rounds every value to the activation type in place and returns the encoded bytes.
inline std::vector<uint8_t> encode(std::vector<double>& values, Act a)
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

inline std::vector<double> decode(std::vector<uint8_t> const& bytes, Act a)
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
inline std::vector<uint8_t> encodeF32(std::vector<double>& values)
{
    return encode(values, Act::kF32);
}

inline std::vector<double> decodeF32(std::vector<uint8_t> const& bytes)
{
    return decode(bytes, Act::kF32);
}

inline std::mt19937_64& rng()
{
    static std::mt19937_64 engine;
    return engine;
}

inline int32_t randInt(int32_t lo, int32_t hi)
{
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng());
}

inline std::vector<double> randn(size_t n, double scale)
{
    std::normal_distribution<double> dist(0.0, scale);
    std::vector<double> v(n);
    for (double& x : v)
    {
        x = dist(rng());
    }
    return v;
}

inline std::vector<double> randu(size_t n, double lo, double hi)
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
inline std::string compare(
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

inline std::string bitwiseEqual(std::string const& what, std::vector<uint8_t> const& a, std::vector<uint8_t> const& b)
{
    if (a == b)
    {
        return "";
    }
    return what + ": not bitwise equal to the one-pass run";
}

inline double maxAbs(std::vector<double> const& v)
{
    double m = 0.0;
    for (double x : v)
    {
        m = std::max(m, std::fabs(x));
    }
    return m;
}

//! The ONNX parser's fields: attributes (INT as kINT32, FLOAT as kFLOAT32) plus plugin_version / _namespace.
inline void addParserExtras(Fields& f)
{
    f.str("plugin_version", "2").str("plugin_namespace", "rnnx");
}

//! Build phase (types, formats, configure, workspace), then serialise -> deserialise -> attach, as TensorRT
//! does; returns the plugin that runs. `workspace` reports the build plugin's answer.
template <typename Plugin, typename Creator>
inline std::unique_ptr<Plugin> buildThenDeserialize(Fields& fields, std::vector<PluginTensorDesc> const& in,
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

//! buildThenDeserialize for a plugin that asks for no workspace (checked).
template <typename Plugin, typename Creator>
inline std::unique_ptr<Plugin> buildWithoutWorkspace(
    Fields& fields, std::vector<PluginTensorDesc> const& in, std::vector<PluginTensorDesc> const& out)
{
    size_t workspace = 1;
    auto plugin = buildThenDeserialize<Plugin, Creator>(fields, in, out, workspace);
    CHECK_EQ(workspace, size_t{0});
    return plugin;
}

//! onShapeChange + enqueue + synchronise.
template <typename Plugin>
inline void run(Plugin& plugin, std::vector<PluginTensorDesc> const& in, std::vector<PluginTensorDesc> const& out,
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

inline void* byteOffset(void* base, size_t bytes)
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

inline char const* name(MaskKind m)
{
    return m == MaskKind::kInt32 ? "int32" : m == MaskKind::kUint8 ? "uint8" : "bool";
}

inline DataType trtMaskType(MaskKind m)
{
    return m == MaskKind::kInt32 ? DataType::kINT32 : m == MaskKind::kUint8 ? DataType::kUINT8 : DataType::kBOOL;
}

inline size_t maskElementSize(MaskKind m)
{
    return m == MaskKind::kInt32 ? 4 : 1;
}

inline MaskKind randomMaskKind()
{
    return static_cast<MaskKind>(randInt(0, 2));
}

//! Pad flags (non-zero = pad) as mask_pad bytes of `kind`. A pad is never just 1 where the type allows more: uint8
//! pads are 1..255, int32 pads include values whose low bytes are all zero (256, 65536, 2^24, INT32_MIN) and -1, so
//! a kernel reading int32 as bytes, or only an element's low byte, misses pads.
inline std::vector<uint8_t> maskBytes(std::vector<uint8_t> const& pads, MaskKind kind)
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

//! A case's outputs (bytes, one vector per output, in the op's output order) from one run with mask_pad bound as
//! the given type.
using MaskedRun = std::function<std::vector<std::vector<uint8_t>>(MaskKind)>;

//! Runs a case with mask_pad bound as int32, then as uint8 and bool: each byte mask must give bitwise the outputs
//! int32 gives. `outputs` names the outputs, `what` the case.
inline void checkMaskKindsAlike(std::vector<std::string> const& outputs, std::string const& what, MaskedRun const& run)
{
    std::vector<std::vector<uint8_t>> const int32Result = run(MaskKind::kInt32);
    for (MaskKind kind : {MaskKind::kUint8, MaskKind::kBool})
    {
        std::vector<std::vector<uint8_t>> const result = run(kind);
        for (size_t i = 0; i < outputs.size(); ++i)
        {
            CHECK_MSG(bitwiseEqual(
                outputs[i] + ", int32 vs " + name(kind) + " mask [" + what + "]", int32Result.at(i), result.at(i)));
        }
    }
}

//! Tolerance of an activation output computed in fp32 from inputs of type `a` (the test_cuda_kernels.py convention).
inline Tolerance activationTolerance(Act a)
{
    return a == Act::kF32 ? Tolerance{1e-4, 1e-4} : a == Act::kF16 ? Tolerance{1e-2, 1e-2} : Tolerance{6e-2, 3e-2};
}

//! activationTolerance(a) with its atol scaled by the reference's magnitude (max |ref| + 1).
inline Tolerance magnitudeTolerance(Act a, std::vector<double> const& ref)
{
    Tolerance const t = activationTolerance(a);
    return {t.atol * (maxAbs(ref) + 1.0), t.rtol};
}

// ------------------------------------------------------------------------------------------------------------
// Sequences of steps (B, T, W): slices and their inverse, for prefill-then-step cases.

//! x (B, T, W) -> its steps [t0, t1) as (B, t1 - t0, W) (values, or pad flags with W = 1).
template <typename Element>
std::vector<Element> sliceSteps(std::vector<Element> const& x, int32_t B, int32_t T, int32_t W, int32_t t0, int32_t t1)
{
    std::vector<Element> out;
    out.reserve(static_cast<size_t>(B) * (t1 - t0) * W);
    for (int32_t b = 0; b < B; ++b)
    {
        out.insert(out.end(), x.begin() + (static_cast<size_t>(b) * T + t0) * W,
            x.begin() + (static_cast<size_t>(b) * T + t1) * W);
    }
    return out;
}

//! The inverse of sliceSteps: writes `part` (B, t1 - t0, W) into x (B, T, W).
inline void scatterSteps(
    std::vector<double>& x, std::vector<double> const& part, int32_t B, int32_t T, int32_t W, int32_t t0, int32_t t1)
{
    for (int32_t b = 0; b < B; ++b)
    {
        std::copy(part.begin() + static_cast<size_t>(b) * (t1 - t0) * W,
            part.begin() + static_cast<size_t>(b + 1) * (t1 - t0) * W,
            x.begin() + (static_cast<size_t>(b) * T + t0) * W);
    }
}

//! Runs a sequence of `T` steps as TensorRT runs a model's prefill and then its decode: a first call of `prefill`
//! steps (at least 1, at most T), then one step per call on `stream`, the state fed back through two device buffers
//! swapped after every call (ping-pong: a call never writes the state it reads), the first holding `initialState`.
//! `call(t0, t1, past, present, stream)` runs the steps [t0, t1) reading the state at `past` and writing it at
//! `present`. Checks that no call changes the state it reads; returns the state after the last step.
inline std::vector<uint8_t> runPrefillThenSteps(int32_t T, int32_t prefill, std::vector<uint8_t> const& initialState,
    std::function<void(int32_t t0, int32_t t1, void* past, void* present, cudaStream_t stream)> const& call)
{
    // An empty state (a kernel size of 1) still gets two distinct (empty) bindings.
    DeviceBuffer stateA = upload(initialState);
    DeviceBuffer stateB(initialState.size());
    Stream stream;
    void* past = stateA.get();
    void* present = stateB.get();
    for (int32_t t0 = 0; t0 < T;)
    {
        int32_t const t1 = t0 + (t0 == 0 ? std::min(std::max(prefill, 1), T) : 1);
        std::vector<uint8_t> const before = download(past, initialState.size());
        call(t0, t1, past, present, stream.get());
        CHECK_MSG(
            bitwiseEqual("past_state read at step " + std::to_string(t0), download(past, initialState.size()), before));
        std::swap(past, present);
        t0 = t1;
    }
    return download(past, initialState.size());
}

//! Runs `runCase(prefill)` for a case of `T` steps twice: all of it in one call (prefill T), then a random prefill
//! (1..T) followed by one step per call.
template <typename RunCase> void inOneCallThenStepped(int32_t T, RunCase const& runCase)
{
    runCase(T);
    runCase(randInt(1, T));
}

// ------------------------------------------------------------------------------------------------------------
// Test-case bodies over the selected activation types.

//! A case written for the type `a` alone: runs `test` when --dtype selected `a`, else nothing.
inline std::function<void()> forType(Act a, void (*test)(Act))
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
inline std::function<void()> forSelectedTypes(void (*test)(Act))
{
    return [test]
    {
        for (Act a : selectedActs())
        {
            test(a);
        }
    };
}

} // namespace test
} // namespace rnnx
