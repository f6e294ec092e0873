#include "artifact.h"

#include <algorithm>

#include "error.h"
#include "sha256.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace rnnx
{
namespace
{

constexpr const char* kMetadataFile = "rnnx.json";
constexpr const char* kFormat = "rnnx-onnx";

bool is_file(const std::string& path)
{
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& path)
{
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

const Json& field(const Json& meta, const std::string& key, Json::Kind kind, const std::string& where)
{
    const Json* value = meta.find(key);
    if (value == nullptr || value->kind() != kind)
        throw Error(RNNX_ERROR_METADATA, where + ": field '" + key + "' missing or of the wrong type");
    return *value;
}

std::string string_field(const Json& meta, const std::string& key, const std::string& where)
{
    return field(meta, key, Json::Kind::String, where).as_string();
}

void check_hash(const std::string& path, const std::string& want, const std::string& what)
{
    if (!is_file(path))
        throw Error(RNNX_ERROR_METADATA, path + ": " + what + " named by rnnx.json is missing");
    if (sha256_file(path) != want)
        throw Error(RNNX_ERROR_METADATA,
            path + ": sha256 does not match rnnx.json; the " + what + " was replaced or is corrupt");
}

StateSpec read_state(const Json& entry, const std::string& where)
{
    StateSpec spec;
    spec.name = string_field(entry, "name", where);
    spec.input = string_field(entry, "input", where);
    spec.output = string_field(entry, "output", where);
    spec.dtype = string_field(entry, "dtype", where);
    const auto& dims = field(entry, "shape", Json::Kind::Array, where).items();
    for (size_t i = 0; i < dims.size(); ++i)
    {
        if (dims[i].is_number())
            spec.shape.push_back(dims[i].as_int());
        else if (dims[i].is_string() && dims[i].as_string() == "batch")
        {
            spec.batch_axis = static_cast<int>(i);
            spec.shape.push_back(-1);
        }
        else if (dims[i].is_string() && dims[i].as_string() == "past_length")
        {
            spec.grow_axis = static_cast<int>(i);
            spec.shape.push_back(-1);
        }
        else
            throw Error(RNNX_ERROR_METADATA, where + ": state '" + spec.name + "' has an axis the runtime cannot size");
    }
    if (spec.batch_axis < 0)
        throw Error(RNNX_ERROR_METADATA, where + ": state '" + spec.name + "' has no 'batch' axis");
    return spec;
}

} // namespace

std::vector<int64_t> StateSpec::concrete(int64_t batch, int64_t past_length) const
{
    std::vector<int64_t> out = shape;
    out[static_cast<size_t>(batch_axis)] = batch;
    if (grow_axis >= 0)
        out[static_cast<size_t>(grow_axis)] = past_length;
    return out;
}

Artifact read_artifact(const std::string& directory)
{
    if (!is_dir(directory))
        throw Error(RNNX_ERROR_IO, directory + ": no such export directory");
    const std::string where = directory + "/" + kMetadataFile;
    if (!is_file(where))
        throw Error(RNNX_ERROR_METADATA, where + ": missing export metadata file");
    std::ifstream in(where);
    std::stringstream text;
    text << in.rdbuf();
    Artifact art;
    try
    {
        art.metadata = parse_json(text.str());
    }
    catch (const JsonError& e)
    {
        throw Error(RNNX_ERROR_METADATA, where + ": " + e.what());
    }
    const Json& meta = art.metadata;
    if (!meta.is_object() || meta.find("format") == nullptr || !meta.find("format")->is_string()
        || meta.find("format")->as_string() != kFormat)
        throw Error(RNNX_ERROR_METADATA, where + ": not rnnx export metadata (format is not 'rnnx-onnx')");
    try
    {
        const int64_t version = field(meta, "format_version", Json::Kind::Number, where).as_int();
        if (version != 1 && version != 2)
            throw Error(RNNX_ERROR_METADATA,
                where + ": unsupported format_version " + std::to_string(version) + " (supported: 1, 2)");
        const Json* interface = meta.find("interface");
        if (interface != nullptr && interface->as_string() != "causal_lm")
            throw Error(RNNX_ERROR_METADATA,
                where + ": interface '" + interface->as_string()
                    + "': the native runtime runs language models (causal_lm)");
        art.directory = directory;
        art.model_type = string_field(meta, "model_type", where);
        art.target = string_field(meta, "target", where);
        const auto target = std::find_if(std::begin(kTargets), std::end(kTargets),
            [&](const TargetRecord& record) { return record.name == art.target; });
        if (target == std::end(kTargets))
            throw Error(RNNX_ERROR_METADATA, where + ": unknown target '" + art.target + "'");
        art.target_record = *target;
        art.precision = string_field(meta, "precision", where);
        if (std::none_of(std::begin(kPrecisions), std::end(kPrecisions),
                [&](const PrecisionRecord& record) { return record.name == art.precision; }))
            throw Error(RNNX_ERROR_METADATA, where + ": unsupported precision '" + art.precision + "'");
        art.vocab_size = field(meta, "vocab_size", Json::Kind::Number, where).as_int();
        const Json* signature = meta.find("signature");
        if (signature == nullptr || !signature->is_string())
            throw Error(RNNX_ERROR_METADATA,
                where + ": no 'signature' (an export written before the native runtime existed); re-export it");
        art.signature = signature->as_string();
        art.model_path = directory + "/" + string_field(meta, "model_file", where);
        check_hash(art.model_path, string_field(meta, "model_sha256", where), "model");
        const Json* external = meta.find("external_data");
        if (external != nullptr && !external->is_null())
            check_hash(directory + "/" + string_field(*external, "file", where),
                string_field(*external, "sha256", where), "model's external data");
        for (const Json& t : field(meta, "inputs", Json::Kind::Array, where).items())
            art.input_names.push_back(string_field(t, "name", where));
        for (const Json& t : field(meta, "outputs", Json::Kind::Array, where).items())
        {
            art.output_names.push_back(string_field(t, "name", where));
            if (art.output_names.back() == "logits")
                art.logits_dtype = string_field(t, "dtype", where);
        }
        for (const Json& s : field(meta, "state", Json::Kind::Array, where).items())
            art.states.push_back(read_state(s, where));
    }
    catch (const JsonError& e)
    {
        throw Error(RNNX_ERROR_METADATA, where + ": " + e.what());
    }
    if (art.input_names.size() < 2 || art.input_names[0] != "input_ids" || art.input_names[1] != "attention_mask")
        throw Error(RNNX_ERROR_METADATA, where + ": inputs must start with input_ids, attention_mask");
    if (art.output_names.empty() || art.output_names[0] != "logits")
        throw Error(RNNX_ERROR_METADATA, where + ": the first output must be logits");
    if (art.input_names.size() != 2 + art.states.size() || art.output_names.size() != 1 + art.states.size())
        throw Error(RNNX_ERROR_METADATA, where + ": inputs / outputs do not match the state list");
    return art;
}

} // namespace rnnx
