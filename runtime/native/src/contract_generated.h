// clang-format off
// Generated from rnnx/runtime/contract/artifact.py (the artifact contract's records) by
// `python3 -m rnnx.runtime.contract.schema --write`: do not edit. tests/test_contract_schema.py fails when this file differs
// from what the records generate. contract.cpp checks rnnx.json and state file headers with these tables, in
// the contract's order, with its refusal texts (artifact.py's REFUSALS).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace rnnx::contract
{

// -- names and versions
inline constexpr std::string_view kFormat = "rnnx-onnx";
inline constexpr std::string_view kMetadataFile = "rnnx.json";
inline constexpr std::string_view kCausalLm = "causal_lm";
inline constexpr std::string_view kStateful = "stateful";
inline constexpr std::string_view kBatch = "batch";
inline constexpr std::string_view kLength = "length";
inline constexpr std::string_view kPastLength = "past_length";
inline constexpr std::string_view kInputIds = "input_ids";
inline constexpr std::string_view kAttentionMask = "attention_mask";
inline constexpr std::string_view kLogits = "logits";
inline constexpr std::string_view kPastPrefix = "past_key_values.";
inline constexpr std::string_view kPresentPrefix = "present.";
inline constexpr std::string_view kStateFormat = "rnnx-state";
inline constexpr std::string_view kStateFormatVersion = "2";
inline constexpr std::string_view kStateTensorPrefix = "state/";
inline constexpr std::string_view kStateLastLogits = "last_logits";
inline constexpr int64_t kFormatVersion = 2;
inline constexpr std::string_view kInterfaces[] = {"causal_lm", "stateful"};
inline constexpr std::string_view kDtypes[] = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool"};
inline constexpr std::string_view kNumpyDtypes[] = {"float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"};
// The readable format_versions, each with its interfaces (bit i: kInterfaces[i]) and their list as a refusal
// shows it.
struct FormatVersion
{
    int64_t version;
    unsigned interfaces;
    std::string_view text;
};
inline constexpr FormatVersion kFormatVersions[] = {
    {1, 1u, "\"causal_lm\""},
    {2, 3u, "\"causal_lm\", \"stateful\""},
};
inline constexpr std::string_view kFormatVersionsText = "1, 2";

// -- the field tables (artifact.py's TABLES)
// JSON kinds, as bits; kKindNames[i] names bit i in a refusal.
enum Kind : unsigned
{
    kNull = 1u,
    kBoolean = 2u,
    kInteger = 4u,
    kNumber = 8u,
    kString = 16u,
    kArray = 32u,
    kObject = 64u,
};
inline constexpr std::string_view kKindNames[] = {"null", "a boolean", "an integer", "a number", "a string", "an array", "an object"};
// What a value must be (artifact.Rule): kinds; a string one of `strings` (when any), non-empty, a file name;
// an integer one of `integers` (when any), >= minimum; an array's items, an item equal to `contains` (when
// not empty); an object's fields kTables[members] (when >= 0) or every value `values`; the refusal's text.
struct Rule
{
    unsigned kinds;
    const std::string_view* strings;
    size_t strings_size;
    const int64_t* integers;
    size_t integers_size;
    bool has_minimum;
    int64_t minimum;
    bool non_empty;
    bool file_name;
    const Rule* items;
    std::string_view contains;
    int members;
    const Rule* values;
    std::string_view expected;
};
// One member of an object: its name, rule and the interfaces that need it (bit i: kInterfaces[i]; 0:
// optional).
struct Field
{
    std::string_view name;
    Rule rule;
    unsigned required;
};
struct Table
{
    std::string_view name;
    const Field* fields;
    size_t size;
};
inline constexpr std::string_view kRuleStrings0[] = {"rnnx-onnx"};
inline constexpr int64_t kRuleIntegers1[] = {1, 2};
inline constexpr std::string_view kRuleStrings2[] = {"causal_lm", "stateful"};
inline constexpr std::string_view kRuleStrings9[] = {"tensorrt", "onnxruntime", "onnx"};
inline constexpr std::string_view kRuleStrings10[] = {"fp32", "fp16"};
inline constexpr Rule kRuleItems12 = {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 1, nullptr, "an object"};
inline constexpr Rule kRuleItems14 = {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 1, nullptr, "an object"};
inline constexpr Rule kRuleItems16 = {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 2, nullptr, "an object"};
inline constexpr Rule kRuleItems28 = {kInteger | kString, nullptr, 0, nullptr, 0, true, 0, true, false, nullptr, {}, -1, nullptr, "an integer >= 0 or a non-empty string"};
inline constexpr std::string_view kRuleStrings30[] = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool"};
inline constexpr std::string_view kRuleStrings35[] = {"batch", "past_length"};
inline constexpr Rule kRuleItems34 = {kInteger | kString, kRuleStrings35, 2, nullptr, 0, true, 0, false, false, nullptr, {}, -1, nullptr, "an integer >= 0 or one of \"batch\", \"past_length\""};
inline constexpr std::string_view kRuleStrings36[] = {"float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"};
inline constexpr std::string_view kRuleStrings40[] = {"int8", "int4"};
inline constexpr int64_t kRuleIntegers41[] = {8, 4};
inline constexpr std::string_view kRuleStrings44[] = {"MatMulNBits", "DequantizeLinear"};
inline constexpr std::string_view kRuleStrings46[] = {"fp", "int8", "int4"};
inline constexpr Rule kRuleValues50 = {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"};
inline constexpr Rule kRuleItems57 = {kInteger, nullptr, 0, nullptr, 0, true, 0, false, false, nullptr, {}, -1, nullptr, "an integer >= 0"};
inline constexpr Field kTableMetadata[] = {
    {"format", {kString, kRuleStrings0, 1, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "\"rnnx-onnx\""}, 3u},
    {"format_version", {kInteger, nullptr, 0, kRuleIntegers1, 2, false, 0, false, false, nullptr, {}, -1, nullptr, "one of 1, 2"}, 3u},
    {"interface", {kString, kRuleStrings2, 2, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"causal_lm\", \"stateful\""}, 0u},
    {"model_file", {kString, nullptr, 0, nullptr, 0, false, 0, true, false, nullptr, {}, -1, nullptr, "a non-empty string"}, 3u},
    {"model_sha256", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 3u},
    {"external_data", {kObject | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 3, nullptr, "an object or null"}, 0u},
    {"model_type", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 3u},
    {"config", {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an object"}, 3u},
    {"vocab_size", {kInteger, nullptr, 0, nullptr, 0, true, 1, false, false, nullptr, {}, -1, nullptr, "an integer >= 1"}, 1u},
    {"target", {kString, kRuleStrings9, 3, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"tensorrt\", \"onnxruntime\", \"onnx\""}, 3u},
    {"precision", {kString, kRuleStrings10, 2, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"fp32\", \"fp16\""}, 3u},
    {"opset", {kInteger, nullptr, 0, nullptr, 0, true, 1, false, false, nullptr, {}, -1, nullptr, "an integer >= 1"}, 3u},
    {"inputs", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, &kRuleItems12, {}, -1, nullptr, "an array"}, 3u},
    {"outputs", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, &kRuleItems14, {}, -1, nullptr, "an array"}, 3u},
    {"state", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, &kRuleItems16, {}, -1, nullptr, "an array"}, 3u},
    {"ops", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an array"}, 3u},
    {"opset_imports", {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an object"}, 3u},
    {"source", {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an object"}, 3u},
    {"versions", {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an object"}, 3u},
    {"signature", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 0u},
    {"quantization", {kObject | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 4, nullptr, "an object or null"}, 0u},
    {"onnxruntime", {kObject | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 5, nullptr, "an object or null"}, 0u},
    {"text", {kObject | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, 6, nullptr, "an object or null"}, 0u},
    {"parity", {kObject | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an object or null"}, 0u},
};
inline constexpr Field kTableTensor[] = {
    {"name", {kString, nullptr, 0, nullptr, 0, false, 0, true, false, nullptr, {}, -1, nullptr, "a non-empty string"}, 3u},
    {"shape", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, &kRuleItems28, {}, -1, nullptr, "an array"}, 3u},
    {"dtype", {kString, kRuleStrings30, 9, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"float32\", \"float16\", \"bfloat16\", \"float64\", \"int64\", \"int32\", \"int8\", \"uint8\", \"bool\""}, 3u},
};
inline constexpr Field kTableState[] = {
    {"name", {kString, nullptr, 0, nullptr, 0, false, 0, true, false, nullptr, {}, -1, nullptr, "a non-empty string"}, 3u},
    {"input", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 0u},
    {"output", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 0u},
    {"shape", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, &kRuleItems34, "batch", -1, nullptr, "a shape with a \"batch\" axis"}, 3u},
    {"dtype", {kString, kRuleStrings36, 8, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"float32\", \"float16\", \"float64\", \"int64\", \"int32\", \"int8\", \"uint8\", \"bool\""}, 3u},
    {"grows", {kBoolean, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a boolean"}, 0u},
};
inline constexpr Field kTableExternalData[] = {
    {"file", {kString, nullptr, 0, nullptr, 0, false, 0, false, true, nullptr, {}, -1, nullptr, "a file name beside the model"}, 3u},
    {"sha256", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 3u},
};
inline constexpr Field kTableQuantization[] = {
    {"scheme", {kString, kRuleStrings40, 2, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"int8\", \"int4\""}, 3u},
    {"bits", {kInteger, nullptr, 0, kRuleIntegers41, 2, false, 0, false, false, nullptr, {}, -1, nullptr, "one of 8, 4"}, 0u},
    {"block_size", {kInteger, nullptr, 0, nullptr, 0, true, 1, false, false, nullptr, {}, -1, nullptr, "an integer >= 1"}, 0u},
    {"symmetric", {kBoolean, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a boolean"}, 0u},
    {"format", {kString, kRuleStrings44, 2, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"MatMulNBits\", \"DequantizeLinear\""}, 3u},
    {"accuracy_level", {kInteger | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an integer or null"}, 0u},
    {"head", {kString, kRuleStrings46, 3, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "one of \"fp\", \"int8\", \"int4\""}, 0u},
    {"embedding", {kBoolean, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a boolean"}, 0u},
    {"quantized", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an array"}, 3u},
    {"excluded", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "an array"}, 0u},
};
inline constexpr Field kTableOnnxruntime[] = {
    {"session_config", {kObject, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, &kRuleValues50, "an object of strings"}, 0u},
};
inline constexpr Field kTableText[] = {
    {"tokenizer", {kString, nullptr, 0, nullptr, 0, false, 0, false, true, nullptr, {}, -1, nullptr, "a file name beside the model"}, 3u},
    {"tokenizer_sha256", {kString, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string"}, 3u},
    {"chat_template", {kString | kNull, nullptr, 0, nullptr, 0, false, 0, false, true, nullptr, {}, -1, nullptr, "a file name beside the model or null"}, 0u},
    {"bos_token", {kString | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string or null"}, 0u},
    {"eos_token", {kString | kNull, nullptr, 0, nullptr, 0, false, 0, false, false, nullptr, {}, -1, nullptr, "a string or null"}, 0u},
    {"eos_token_ids", {kArray, nullptr, 0, nullptr, 0, false, 0, false, false, &kRuleItems57, {}, -1, nullptr, "an array"}, 0u},
};
inline constexpr Table kTables[] = {
    {"metadata", kTableMetadata, 24},
    {"tensor", kTableTensor, 3},
    {"state", kTableState, 6},
    {"external_data", kTableExternalData, 2},
    {"quantization", kTableQuantization, 10},
    {"onnxruntime", kTableOnnxruntime, 1},
    {"text", kTableText, 6},
};

// -- a causal_lm graph's data inputs and outputs (artifact.py's LM_INPUTS, LM_OUTPUTS)
struct LmSlot
{
    std::string_view name;
    const std::string_view* dtypes;
    size_t dtypes_size;
    std::string_view expected_dtype;
};
inline constexpr std::string_view kLmInputsDtypes0[] = {"int64"};
inline constexpr std::string_view kLmInputsDtypes1[] = {"int64"};
inline constexpr LmSlot kLmInputs[] = {
    {"input_ids", kLmInputsDtypes0, 1, "\"int64\""},
    {"attention_mask", kLmInputsDtypes1, 1, "\"int64\""},
};
inline constexpr std::string_view kLmInputsLead = "\"input_ids\", \"attention_mask\"";
inline constexpr std::string_view kLmOutputsDtypes0[] = {"float32", "float16"};
inline constexpr LmSlot kLmOutputs[] = {
    {"logits", kLmOutputsDtypes0, 2, "one of \"float32\", \"float16\""},
};
inline constexpr std::string_view kLmOutputsLead = "\"logits\"";

// -- refusals (artifact.py's REFUSALS): the text after "<path>: ", placeholders {name}
struct Refusal
{
    std::string_view reason;
    std::string_view text;
};
inline constexpr Refusal kRefusals[] = {
    {"no_directory", "no such export directory"},
    {"missing_file", "missing export metadata file"},
    {"unreadable_file", "cannot read export metadata ({detail})"},
    {"not_json", "invalid JSON ({detail})"},
    {"not_an_object", "not rnnx export metadata: the file holds {got}, expected an object"},
    {"format", "not rnnx export metadata (format {got}, expected {expected})"},
    {"format_version", "unsupported format_version {got} (supported: {expected})"},
    {"interface", "unsupported interface {got} for format_version {version} (supported: {expected})"},
    {"interface_not_runnable", "interface {got} is not run here: this runtime generates tokens from {expected} exports"},
    {"field_missing", "field {field} missing, expected {expected}"},
    {"field_type", "field {field} is {got}, expected {expected}"},
    {"field_value", "field {field} is {got}, expected {expected}"},
    {"duplicate_name", "field {field} is {got}, the name of an earlier input or output"},
    {"state_io_name", "field {field} is {got}, expected {expected} (the state's name after its prefix)"},
    {"state_not_in_graph", "state {name}: {got} is not a graph {end}"},
    {"lm_count", "field {field} has {got} entries, expected {expected} ({lead} and one per state tensor)"},
    {"lm_layout", "field {field} is {got}, expected {expected} in a {interface} graph"},
    {"signature_mismatch", "field \"signature\" does not match the model type, config, state layout and weights it names"},
    {"no_signature", "field \"signature\" missing (an export written before the native runtime existed); re-export it"},
    {"model_missing", "model file named by rnnx.json is missing"},
    {"model_hash", "sha256 does not match rnnx.json; the model was replaced or is corrupt"},
    {"data_missing", "external data file named by rnnx.json is missing"},
    {"data_hash", "sha256 does not match rnnx.json; the model's external data was replaced or is corrupt"},
    {"state_unreadable", "not an rnnx state file, or truncated ({detail})"},
    {"state_format", "not an rnnx state file (format {got}, expected {expected})"},
    {"state_format_version", "unsupported state file format_version {got} (supported: {expected})"},
    {"state_header_missing", "state file header field {field} missing, expected {expected}"},
    {"state_header_value", "state file header field {field} is {got}, expected {expected}"},
    {"state_signature", "state was saved from a different model: signature {got}..., this model {expected}..."},
};

// -- a state file's header metadata (artifact.py's STATE_HEADER), in check order
struct HeaderField
{
    std::string_view name;
    std::string_view value;  // the one it takes (refused with `reason`); empty: any
    std::string_view reason;
    bool has_minimum;  // a decimal integer (at most 18 digits) >= minimum
    int64_t minimum;
    bool required;
    std::string_view expected;
};
inline constexpr HeaderField kStateHeader[] = {
    {"format", "rnnx-state", "state_format", false, 0, true, "\"rnnx-state\""},
    {"format_version", "2", "state_format_version", false, 0, true, "\"2\""},
    {"names", "", "", false, 0, true, "a string"},
    {"batch", "", "", true, 1, true, "a decimal integer >= 1"},
    {"past_length", "", "", true, 0, true, "a decimal integer >= 0"},
    {"signature", "", "", false, 0, true, "a string"},
    {"backend", "", "", false, 0, false, "a string"},
    {"conversation", "", "", false, 0, false, "a string"},
    {"chat", "", "", false, 0, false, "a string"},
};

} // namespace rnnx::contract
// clang-format on
