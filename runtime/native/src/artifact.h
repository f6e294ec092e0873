// The export directory as rnnx.json describes it (the artifact contract, rnnx/runtime/contract/artifact.py): what the
// runtime needs to call the graph, read with the same checks as Python's read_metadata (contract.h).
#pragma once

#include "json.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rnnx
{

// The export targets and precisions the native runtime reads: rows of rnnx/runtime/contract/targets.py's records
// (tests/test_native_runtime.py holds the two to the same names and fields).
struct TargetRecord
{
    std::string_view name;
    bool builds_engine; // TensorRT engines are built from exports of this target
};
inline constexpr TargetRecord kTargets[] = {{"tensorrt", true}, {"onnxruntime", false}, {"onnx", false}};

struct PrecisionRecord
{
    std::string_view name;
    std::string_view dtype; // of the weights and activations (state is float32 in every precision)
};
// The precisions an export comes in.
inline constexpr PrecisionRecord kPrecisions[] = {{"fp32", "float32"}, {"fp16", "float16"}};

// One state tensor: its flat name, graph input / output names, shape (ints; -1 at the batch axis and at a
// KV cache's past_length axis), dtype and those axes.
struct StateSpec
{
    std::string name;
    std::string input;
    std::string output;
    std::vector<int64_t> shape;
    std::string dtype;
    int batch_axis = -1;
    int grow_axis = -1;

    // The shape for `batch` rows and `past_length` positions fed.
    std::vector<int64_t> concrete(int64_t batch, int64_t past_length) const;
};

struct Artifact
{
    std::string directory;
    std::string model_path;
    std::string model_type;
    std::string target;
    std::string precision;
    TargetRecord target_record{};
    std::string logits_dtype;
    std::string signature;
    int64_t vocab_size = 0;
    std::vector<std::string> input_names;  // graph order, state inputs included
    std::vector<std::string> output_names; // graph order, state outputs included
    std::vector<StateSpec> states;
    Json metadata;
};

// Reads and checks `directory`/rnnx.json in the artifact contract's order and with its refusals (contract.h, the
// check list of rnnx/runtime/contract/artifact.py): the file, the document (format, version, interface causal_lm),
// every field, the graph, the causal_lm layout, then a signature and the model's and its external data's sha256.
// Throws Error naming the file and the field, with the refusal's reason.
Artifact read_artifact(const std::string& directory);

} // namespace rnnx
