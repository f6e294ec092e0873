// Generated from rnnx/runtime/contract/artifact.py (the artifact contract's records) by
// `python3 -m rnnx.runtime.contract.schema --write`: do not edit. tests/test_contract_schema.py fails when this file differs
// from what the records generate. rnnx.mjs checks rnnx.json with these tables, in the contract's order, with
// its refusal texts (artifact.py's REFUSALS).

/** rnnx.json's format name, its version, and the versions a reader accepts. */
export const FORMAT = "rnnx-onnx";
export const FORMAT_VERSION = 2;
export const READABLE_FORMAT_VERSIONS = [1, 2];
export const FORMAT_VERSIONS_TEXT = "1, 2";
/** Each readable format_version's interfaces, and their list as shown. */
export const INTERFACES_BY_VERSION = {"1": {"interfaces": ["causal_lm"], "text": "\"causal_lm\""}, "2": {"interfaces": ["causal_lm", "stateful"], "text": "\"causal_lm\", \"stateful\""}};
export const METADATA_FILE = "rnnx.json";
export const MODEL_FILE = "model.onnx";
/** The graph interfaces. */
export const CAUSAL_LM = "causal_lm";
export const STATEFUL = "stateful";
export const INTERFACES = ["causal_lm", "stateful"];
/** Graph tensor names, state prefixes and axes. */
export const INPUT_IDS = "input_ids";
export const ATTENTION_MASK = "attention_mask";
export const LOGITS = "logits";
export const PAST_PREFIX = "past_key_values.";
export const PRESENT_PREFIX = "present.";
export const BATCH = "batch";
export const LENGTH = "length";
export const PAST_LENGTH = "past_length";
export const AXES = ["batch", "length", "past_length"];
/** dtype names rnnx.json spells, and those a state tensor may have. */
export const DTYPES = ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool"];
export const NUMPY_DTYPES = ["float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"];
/** State files (the Python runtime and the C API read and write them). */
export const STATE_FORMAT = "rnnx-state";
export const STATE_FORMAT_VERSION = "2";
export const STATE_TENSOR_PREFIX = "state/";
export const STATE_LAST_LOGITS = "last_logits";
/** A state file's header metadata, in check order. */
export const STATE_HEADER = [
  {"name": "format", "value": "rnnx-state", "reason": "state_format", "minimum": null, "required": true, "expected": "\"rnnx-state\""},
  {"name": "format_version", "value": "2", "reason": "state_format_version", "minimum": null, "required": true, "expected": "\"2\""},
  {"name": "names", "value": "", "reason": "", "minimum": null, "required": true, "expected": "a string"},
  {"name": "batch", "value": "", "reason": "", "minimum": 1, "required": true, "expected": "a decimal integer >= 1"},
  {"name": "past_length", "value": "", "reason": "", "minimum": 0, "required": true, "expected": "a decimal integer >= 0"},
  {"name": "signature", "value": "", "reason": "", "minimum": null, "required": true, "expected": "a string"},
  {"name": "backend", "value": "", "reason": "", "minimum": null, "required": false, "expected": "a string"},
  {"name": "conversation", "value": "", "reason": "", "minimum": null, "required": false, "expected": "a string"},
  {"name": "chat", "value": "", "reason": "", "minimum": null, "required": false, "expected": "a string"}
];
/** JSON kinds and how a refusal names each. */
export const KINDS = {
  "null": "null",
  "boolean": "a boolean",
  "integer": "an integer",
  "number": "a number",
  "string": "a string",
  "array": "an array",
  "object": "an object"
};
/** The fields of each object of rnnx.json, in check order (artifact.py's TABLES). */
export const TABLES = {
  "metadata": [
    {"name": "format", "rule": {"kinds": ["string"], "strings": ["rnnx-onnx"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "\"rnnx-onnx\""}, "required": ["causal_lm", "stateful"]},
    {"name": "format_version", "rule": {"kinds": ["integer"], "strings": [], "integers": [1, 2], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of 1, 2"}, "required": ["causal_lm", "stateful"]},
    {"name": "interface", "rule": {"kinds": ["string"], "strings": ["causal_lm", "stateful"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"causal_lm\", \"stateful\""}, "required": []},
    {"name": "model_file", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": true, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a non-empty string"}, "required": ["causal_lm", "stateful"]},
    {"name": "model_sha256", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": ["causal_lm", "stateful"]},
    {"name": "external_data", "rule": {"kinds": ["object", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "external_data", "values": null, "expected": "an object or null"}, "required": []},
    {"name": "model_type", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": ["causal_lm", "stateful"]},
    {"name": "config", "rule": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an object"}, "required": ["causal_lm", "stateful"]},
    {"name": "vocab_size", "rule": {"kinds": ["integer"], "strings": [], "integers": [], "minimum": 1, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer >= 1"}, "required": ["causal_lm"]},
    {"name": "target", "rule": {"kinds": ["string"], "strings": ["tensorrt", "onnxruntime", "onnx"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"tensorrt\", \"onnxruntime\", \"onnx\""}, "required": ["causal_lm", "stateful"]},
    {"name": "precision", "rule": {"kinds": ["string"], "strings": ["fp32", "fp16"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"fp32\", \"fp16\""}, "required": ["causal_lm", "stateful"]},
    {"name": "opset", "rule": {"kinds": ["integer"], "strings": [], "integers": [], "minimum": 1, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer >= 1"}, "required": ["causal_lm", "stateful"]},
    {"name": "inputs", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "tensor", "values": null, "expected": "an object"}, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": ["causal_lm", "stateful"]},
    {"name": "outputs", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "tensor", "values": null, "expected": "an object"}, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": ["causal_lm", "stateful"]},
    {"name": "state", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "state", "values": null, "expected": "an object"}, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": ["causal_lm", "stateful"]},
    {"name": "ops", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": ["causal_lm", "stateful"]},
    {"name": "opset_imports", "rule": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an object"}, "required": ["causal_lm", "stateful"]},
    {"name": "source", "rule": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an object"}, "required": ["causal_lm", "stateful"]},
    {"name": "versions", "rule": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an object"}, "required": ["causal_lm", "stateful"]},
    {"name": "signature", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": []},
    {"name": "quantization", "rule": {"kinds": ["object", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "quantization", "values": null, "expected": "an object or null"}, "required": []},
    {"name": "onnxruntime", "rule": {"kinds": ["object", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "onnxruntime", "values": null, "expected": "an object or null"}, "required": []},
    {"name": "text", "rule": {"kinds": ["object", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": "text", "values": null, "expected": "an object or null"}, "required": []},
    {"name": "parity", "rule": {"kinds": ["object", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an object or null"}, "required": []}
  ],
  "tensor": [
    {"name": "name", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": true, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a non-empty string"}, "required": ["causal_lm", "stateful"]},
    {"name": "shape", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": {"kinds": ["integer", "string"], "strings": [], "integers": [], "minimum": 0, "nonEmpty": true, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer >= 0 or a non-empty string"}, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": ["causal_lm", "stateful"]},
    {"name": "dtype", "rule": {"kinds": ["string"], "strings": ["float32", "float16", "bfloat16", "float64", "int64", "int32", "int8", "uint8", "bool"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"float32\", \"float16\", \"bfloat16\", \"float64\", \"int64\", \"int32\", \"int8\", \"uint8\", \"bool\""}, "required": ["causal_lm", "stateful"]}
  ],
  "state": [
    {"name": "name", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": true, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a non-empty string"}, "required": ["causal_lm", "stateful"]},
    {"name": "input", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": []},
    {"name": "output", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": []},
    {"name": "shape", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": {"kinds": ["integer", "string"], "strings": ["batch", "past_length"], "integers": [], "minimum": 0, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer >= 0 or one of \"batch\", \"past_length\""}, "contains": "batch", "members": null, "values": null, "expected": "a shape with a \"batch\" axis"}, "required": ["causal_lm", "stateful"]},
    {"name": "dtype", "rule": {"kinds": ["string"], "strings": ["float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"float32\", \"float16\", \"float64\", \"int64\", \"int32\", \"int8\", \"uint8\", \"bool\""}, "required": ["causal_lm", "stateful"]},
    {"name": "grows", "rule": {"kinds": ["boolean"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a boolean"}, "required": []}
  ],
  "external_data": [
    {"name": "file", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": true, "items": null, "contains": null, "members": null, "values": null, "expected": "a file name beside the model"}, "required": ["causal_lm", "stateful"]},
    {"name": "sha256", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": ["causal_lm", "stateful"]}
  ],
  "quantization": [
    {"name": "scheme", "rule": {"kinds": ["string"], "strings": ["int8", "int4"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"int8\", \"int4\""}, "required": ["causal_lm", "stateful"]},
    {"name": "bits", "rule": {"kinds": ["integer"], "strings": [], "integers": [8, 4], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of 8, 4"}, "required": []},
    {"name": "block_size", "rule": {"kinds": ["integer"], "strings": [], "integers": [], "minimum": 1, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer >= 1"}, "required": []},
    {"name": "symmetric", "rule": {"kinds": ["boolean"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a boolean"}, "required": []},
    {"name": "format", "rule": {"kinds": ["string"], "strings": ["MatMulNBits", "DequantizeLinear"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"MatMulNBits\", \"DequantizeLinear\""}, "required": ["causal_lm", "stateful"]},
    {"name": "accuracy_level", "rule": {"kinds": ["integer", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer or null"}, "required": []},
    {"name": "head", "rule": {"kinds": ["string"], "strings": ["fp", "int8", "int4"], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "one of \"fp\", \"int8\", \"int4\""}, "required": []},
    {"name": "embedding", "rule": {"kinds": ["boolean"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a boolean"}, "required": []},
    {"name": "quantized", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": ["causal_lm", "stateful"]},
    {"name": "excluded", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": []}
  ],
  "onnxruntime": [
    {"name": "session_config", "rule": {"kinds": ["object"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "expected": "an object of strings"}, "required": []}
  ],
  "text": [
    {"name": "tokenizer", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": true, "items": null, "contains": null, "members": null, "values": null, "expected": "a file name beside the model"}, "required": ["causal_lm", "stateful"]},
    {"name": "tokenizer_sha256", "rule": {"kinds": ["string"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string"}, "required": ["causal_lm", "stateful"]},
    {"name": "chat_template", "rule": {"kinds": ["string", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": true, "items": null, "contains": null, "members": null, "values": null, "expected": "a file name beside the model or null"}, "required": []},
    {"name": "bos_token", "rule": {"kinds": ["string", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string or null"}, "required": []},
    {"name": "eos_token", "rule": {"kinds": ["string", "null"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "a string or null"}, "required": []},
    {"name": "eos_token_ids", "rule": {"kinds": ["array"], "strings": [], "integers": [], "minimum": null, "nonEmpty": false, "fileName": false, "items": {"kinds": ["integer"], "strings": [], "integers": [], "minimum": 0, "nonEmpty": false, "fileName": false, "items": null, "contains": null, "members": null, "values": null, "expected": "an integer >= 0"}, "contains": null, "members": null, "values": null, "expected": "an array"}, "required": []}
  ]
};
/** A causal_lm graph's data inputs and outputs, first and in this order. */
export const LM_SLOTS = {
  "inputs": [
    {"name": "input_ids", "dtypes": ["int64"], "expected": "\"int64\""},
    {"name": "attention_mask", "dtypes": ["int64"], "expected": "\"int64\""}
  ],
  "outputs": [
    {"name": "logits", "dtypes": ["float32", "float16"], "expected": "one of \"float32\", \"float16\""}
  ]
};
export const LM_LEAD = {"inputs": "\"input_ids\", \"attention_mask\"", "outputs": "\"logits\""};
/** Every refusal by reason: the text after "<path>: ", placeholders {name}. */
export const REFUSALS = {"no_directory": "no such export directory", "missing_file": "missing export metadata file", "unreadable_file": "cannot read export metadata ({detail})", "not_json": "invalid JSON ({detail})", "not_an_object": "not rnnx export metadata: the file holds {got}, expected an object", "format": "not rnnx export metadata (format {got}, expected {expected})", "format_version": "unsupported format_version {got} (supported: {expected})", "interface": "unsupported interface {got} for format_version {version} (supported: {expected})", "interface_not_runnable": "interface {got} is not run here: this runtime generates tokens from {expected} exports", "field_missing": "field {field} missing, expected {expected}", "field_type": "field {field} is {got}, expected {expected}", "field_value": "field {field} is {got}, expected {expected}", "duplicate_name": "field {field} is {got}, the name of an earlier input or output", "state_io_name": "field {field} is {got}, expected {expected} (the state's name after its prefix)", "state_not_in_graph": "state {name}: {got} is not a graph {end}", "lm_count": "field {field} has {got} entries, expected {expected} ({lead} and one per state tensor)", "lm_layout": "field {field} is {got}, expected {expected} in a {interface} graph", "signature_mismatch": "field \"signature\" does not match the model type, config, state layout and weights it names", "no_signature": "field \"signature\" missing (an export written before the native runtime existed); re-export it", "model_missing": "model file named by rnnx.json is missing", "model_hash": "sha256 does not match rnnx.json; the model was replaced or is corrupt", "data_missing": "external data file named by rnnx.json is missing", "data_hash": "sha256 does not match rnnx.json; the model's external data was replaced or is corrupt", "state_unreadable": "not an rnnx state file, or truncated ({detail})", "state_format": "not an rnnx state file (format {got}, expected {expected})", "state_format_version": "unsupported state file format_version {got} (supported: {expected})", "state_header_missing": "state file header field {field} missing, expected {expected}", "state_header_value": "state file header field {field} is {got}, expected {expected}", "state_signature": "state was saved from a different model: signature {got}..., this model {expected}..."};
