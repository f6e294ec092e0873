// A backend runs the export's graph: one call feeds input_ids / attention_mask (batch, length) int64 and the
// state, and gives the logits (batch, length, vocab) as float32 and the new state. The state's tensors stay
// in the backend's own values (ONNX Runtime values, TensorRT device buffers) between calls.
#pragma once

#include "artifact.h"
#include "tensor.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rnnx
{

struct BackendState
{
    virtual ~BackendState() = default;
};

class Backend
{
public:
    virtual ~Backend() = default;
    // One line: backend and device.
    virtual std::string describe() const = 0;
    // Zeros for `batch` rows (a KV cache of length 0).
    virtual std::unique_ptr<BackendState> init_state(int64_t batch) = 0;
    // A deep copy; by default through the host (a backend with a device-side copy overrides it).
    virtual std::unique_ptr<BackendState> copy_state(const BackendState& state)
    {
        return state_from_host(state_to_host(state));
    }
    // The state tensors in rnnx.json's order, on the host.
    virtual std::vector<HostTensor> state_to_host(const BackendState& state) = 0;
    // Host tensors (checked against the specs by the caller) -> a backend state.
    virtual std::unique_ptr<BackendState> state_from_host(const std::vector<HostTensor>& tensors) = 0;
    // One graph call; replaces `state` with the new state; logits (batch * length * vocab) float32.
    virtual void run(const std::vector<int64_t>& ids, const std::vector<int64_t>& mask, int64_t batch, int64_t length,
        std::unique_ptr<BackendState>& state, std::vector<float>& logits) = 0;
};

struct BackendOptions
{
    std::string device = "cpu";
    std::string ort_ops_library;
    std::string trt_plugin_library;
    std::string trt_engine;
    int intra_op_threads = 0;
};

std::unique_ptr<Backend> make_onnxruntime_backend(const Artifact& artifact, const BackendOptions& options);
// Throws Error(UNAVAILABLE) when libnvinfer / libcudart cannot be loaded, or in a build without TensorRT headers.
std::unique_ptr<Backend> make_tensorrt_backend(const Artifact& artifact, const BackendOptions& options);

// The backends rnnx_model_open knows: its `backend` option's value, the device when none is given, the factory.
struct BackendKind
{
    std::string_view name;
    const char* default_device;
    std::unique_ptr<Backend> (*make)(const Artifact&, const BackendOptions&);
};
inline constexpr BackendKind kBackends[] = {
    {"onnxruntime", "cpu", make_onnxruntime_backend},
    {"tensorrt", "cuda", make_tensorrt_backend},
};

// float16 / bfloat16 bits -> float.
float half_to_float(uint16_t bits);

} // namespace rnnx
