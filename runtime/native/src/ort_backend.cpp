// The ONNX Runtime backend: the CPU execution provider, or CUDA's when asked and present; rnnx's ORT
// custom-op library registered when given (the native rnnx ops; without it their function bodies run).
#include "backend.h"
#include "error.h"

#include <onnxruntime_cxx_api.h>

#include <array>
#include <cstring>
#include <utility>

namespace rnnx
{

float half_to_float(uint16_t bits)
{
    const uint32_t sign = (bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1Fu;
    uint32_t mantissa = bits & 0x3FFu;
    uint32_t out;
    if (exponent == 0)
    {
        if (mantissa == 0)
            out = sign;
        else
        {
            exponent = 127 - 15 + 1;
            while (!(mantissa & 0x400u))
            {
                mantissa <<= 1;
                --exponent;
            }
            out = sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13);
        }
    }
    else if (exponent == 31)
        out = sign | 0x7F800000u | (mantissa << 13);
    else
        out = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    float f;
    std::memcpy(&f, &out, sizeof(f));
    return f;
}

namespace
{

ONNXTensorElementDataType element_type(const std::string& dtype)
{
    static const std::pair<const char*, ONNXTensorElementDataType> types[] = {
        {"float32", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT},
        {"float16", ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16},
        {"bfloat16", ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16},
        {"float64", ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE},
        {"int64", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64},
        {"int32", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32},
        {"int8", ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8},
        {"uint8", ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8},
        {"bool", ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL},
    };
    for (const auto& [name, type] : types)
        if (dtype == name)
            return type;
    throw Error(RNNX_ERROR_METADATA, "state dtype '" + dtype + "' is not supported by the ONNX Runtime backend");
}

struct OrtState : BackendState
{
    std::vector<Ort::Value> values; // rnnx.json's state order
};

class OrtBackend : public Backend
{
public:
    OrtBackend(const Artifact& artifact, const BackendOptions& options)
        : artifact_(artifact)
        , env_(ORT_LOGGING_LEVEL_ERROR, "rnnx")
        , device_(options.device)
        , memory_(Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault))
    {
        Ort::SessionOptions session_options;
        if (options.intra_op_threads > 0)
            session_options.SetIntraOpNumThreads(options.intra_op_threads);
        // The session config entries the export asks for (rnnx.json "onnxruntime": {"session_config": ...},
        // rnnx.runtime.contract.artifact.ORT_SESSION_CONFIG); absent in older exports.
        if (const Json* section = artifact.metadata.find("onnxruntime"); section != nullptr && section->is_object())
            if (const Json* config = section->find("session_config"); config != nullptr && config->is_object())
                for (const auto& [key, value] : config->members())
                    if (value.is_string())
                        session_options.AddConfigEntry(key.c_str(), value.as_string().c_str());
        if (!options.ort_ops_library.empty())
        {
            try
            {
                session_options.RegisterCustomOpsLibrary(options.ort_ops_library.c_str());
            }
            catch (const Ort::Exception& e)
            {
                throw Error(RNNX_ERROR_BACKEND,
                    options.ort_ops_library + ": ONNX Runtime could not register this op library: " + e.what());
            }
            native_ops_ = true;
        }
        if (device_ == "cuda")
        {
            try
            {
                OrtCUDAProviderOptions cuda{};
                session_options.AppendExecutionProvider_CUDA(cuda);
            }
            catch (const Ort::Exception& e)
            {
                throw Error(RNNX_ERROR_UNAVAILABLE,
                    std::string("device cuda: ONNX Runtime's CUDA execution provider is not available here (")
                        + e.what() + ")");
            }
        }
        else if (device_ != "cpu")
            throw Error(RNNX_ERROR_INVALID_ARGUMENT, "device must be 'cpu' or 'cuda', got '" + device_ + "'");
        session_ = std::make_unique<Ort::Session>(env_, artifact_.model_path.c_str(), session_options);
        for (const auto& name : artifact_.input_names)
            input_ptrs_.push_back(name.c_str());
        for (const auto& name : artifact_.output_names)
            output_ptrs_.push_back(name.c_str());
    }

    std::string describe() const override
    {
        return std::string("onnxruntime on ") + device_ + (native_ops_ ? ", native rnnx ops" : "");
    }

    std::unique_ptr<BackendState> init_state(int64_t batch) override
    {
        auto state = std::make_unique<OrtState>();
        Ort::AllocatorWithDefaultOptions allocator;
        for (const StateSpec& spec : artifact_.states)
        {
            const std::vector<int64_t> shape = spec.concrete(batch, 0);
            Ort::Value value =
                Ort::Value::CreateTensor(allocator, shape.data(), shape.size(), element_type(spec.dtype));
            const size_t bytes = static_cast<size_t>(numel(shape)) * itemsize(spec.dtype);
            if (bytes)
                std::memset(value.GetTensorMutableRawData(), 0, bytes);
            state->values.push_back(std::move(value));
        }
        return state;
    }

    std::vector<HostTensor> state_to_host(const BackendState& state) override
    {
        const auto& values = static_cast<const OrtState&>(state).values;
        std::vector<HostTensor> out;
        for (size_t i = 0; i < values.size(); ++i)
        {
            HostTensor t;
            t.dtype = artifact_.states[i].dtype;
            t.shape = values[i].GetTensorTypeAndShapeInfo().GetShape();
            const size_t bytes = static_cast<size_t>(numel(t.shape)) * itemsize(t.dtype);
            const auto* data = static_cast<const uint8_t*>(values[i].GetTensorRawData());
            t.bytes.assign(data, data + bytes);
            out.push_back(std::move(t));
        }
        return out;
    }

    std::unique_ptr<BackendState> state_from_host(const std::vector<HostTensor>& tensors) override
    {
        auto state = std::make_unique<OrtState>();
        Ort::AllocatorWithDefaultOptions allocator;
        for (const HostTensor& t : tensors)
        {
            Ort::Value value =
                Ort::Value::CreateTensor(allocator, t.shape.data(), t.shape.size(), element_type(t.dtype));
            if (!t.bytes.empty())
                std::memcpy(value.GetTensorMutableRawData(), t.bytes.data(), t.bytes.size());
            state->values.push_back(std::move(value));
        }
        return state;
    }

    void run(const std::vector<int64_t>& ids, const std::vector<int64_t>& mask, int64_t batch, int64_t length,
        std::unique_ptr<BackendState>& state, std::vector<float>& logits) override
    {
        auto& values = static_cast<OrtState&>(*state).values;
        const std::array<int64_t, 2> shape = {batch, length};
        std::vector<Ort::Value> inputs;
        inputs.push_back(Ort::Value::CreateTensor<int64_t>(
            memory_, const_cast<int64_t*>(ids.data()), ids.size(), shape.data(), shape.size()));
        inputs.push_back(Ort::Value::CreateTensor<int64_t>(
            memory_, const_cast<int64_t*>(mask.data()), mask.size(), shape.data(), shape.size()));
        for (auto& value : values)
            inputs.push_back(std::move(value));
        std::vector<Ort::Value> outputs;
        std::vector<float> result;
        try
        {
            outputs = session_->Run(Ort::RunOptions{nullptr}, input_ptrs_.data(), inputs.data(), inputs.size(),
                output_ptrs_.data(), output_ptrs_.size());
            result = read_logits(outputs[0], batch, length);
            check_state_outputs(outputs, batch, length, inputs);
        }
        catch (...)
        {
            // whatever failed, the state is left as it was: its values go back from the inputs
            values.clear();
            for (size_t i = 2; i < inputs.size(); ++i)
                values.push_back(std::move(inputs[i]));
            try
            {
                throw;
            }
            catch (const Ort::Exception& e)
            {
                throw Error(RNNX_ERROR_BACKEND, std::string("ONNX Runtime: ") + e.what());
            }
        }
        logits.swap(result);
        std::vector<Ort::Value> next;
        for (size_t i = 1; i < outputs.size(); ++i)
            next.push_back(std::move(outputs[i]));
        values.swap(next);
    }

private:
    // The logits output as float32, after checking its type and element count against rnnx.json (a file that
    // disagrees with its graph is an error, never an out-of-bounds read).
    std::vector<float> read_logits(const Ort::Value& value, int64_t batch, int64_t length) const
    {
        const auto info = value.GetTensorTypeAndShapeInfo();
        const bool half = artifact_.logits_dtype == "float16";
        const auto want_type = half ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
        const std::vector<int64_t> want = {batch, length, artifact_.vocab_size};
        if (info.GetElementType() != want_type || info.GetShape() != want)
            throw Error(RNNX_ERROR_METADATA,
                artifact_.directory + "/rnnx.json: the graph's logits are " + shape_text(info.GetShape())
                    + " of element type " + std::to_string(info.GetElementType()) + ", rnnx.json says "
                    + artifact_.logits_dtype + " " + shape_text(want));
        const size_t count = static_cast<size_t>(batch * length * artifact_.vocab_size);
        std::vector<float> out(count);
        if (half)
        {
            const auto* data = value.GetTensorData<uint16_t>();
            for (size_t i = 0; i < count; ++i)
                out[i] = half_to_float(data[i]);
        }
        else
            std::memcpy(out.data(), value.GetTensorData<float>(), count * sizeof(float));
        return out;
    }

    // Every present state has the spec's element type and shape (batch rows; a KV cache past + length).
    void check_state_outputs(const std::vector<Ort::Value>& outputs, int64_t batch, int64_t length,
        const std::vector<Ort::Value>& inputs) const
    {
        for (size_t i = 0; i < artifact_.states.size(); ++i)
        {
            const StateSpec& spec = artifact_.states[i];
            const auto past = inputs[2 + i].GetTensorTypeAndShapeInfo().GetShape();
            const int64_t grown = spec.grow_axis >= 0 ? past[static_cast<size_t>(spec.grow_axis)] + length : 0;
            const std::vector<int64_t> want = spec.concrete(batch, grown);
            const auto info = outputs[1 + i].GetTensorTypeAndShapeInfo();
            if (info.GetElementType() != element_type(spec.dtype) || info.GetShape() != want)
                throw Error(RNNX_ERROR_METADATA,
                    artifact_.directory + "/rnnx.json: state '" + spec.name + "' is " + shape_text(info.GetShape())
                        + " in the graph, rnnx.json says " + spec.dtype + " " + shape_text(want));
        }
    }

    const Artifact& artifact_;
    Ort::Env env_;
    std::string device_;
    Ort::MemoryInfo memory_;
    std::unique_ptr<Ort::Session> session_;
    std::vector<const char*> input_ptrs_;
    std::vector<const char*> output_ptrs_;
    bool native_ops_ = false;
};

} // namespace

std::unique_ptr<Backend> make_onnxruntime_backend(const Artifact& artifact, const BackendOptions& options)
{
    try
    {
        return std::make_unique<OrtBackend>(artifact, options);
    }
    catch (const Ort::Exception& e)
    {
        throw Error(RNNX_ERROR_BACKEND, artifact.model_path + ": ONNX Runtime could not load it: " + e.what());
    }
}

} // namespace rnnx
