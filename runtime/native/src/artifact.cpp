#include "artifact.h"

#include "contract.h"
#include "error.h"
#include "sha256.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace rnnx
{
namespace
{

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

// A member that check_metadata has checked: present and of its kind.
const Json& member(const Json& object, const std::string& key)
{
    return *object.find(key);
}

void check_hash(const std::string& path, const std::string& want, const char* what)
{
    if (!is_file(path))
        throw refusal(RNNX_ERROR_METADATA, path, std::string(what) + "_missing");
    if (sha256_file(path) != want)
        throw refusal(RNNX_ERROR_METADATA, path, std::string(what) + "_hash");
}

StateSpec read_state(const Json& entry)
{
    StateSpec spec;
    spec.name = member(entry, "name").as_string();
    spec.input = std::string(contract::kPastPrefix) + spec.name;
    spec.output = std::string(contract::kPresentPrefix) + spec.name;
    spec.dtype = member(entry, "dtype").as_string();
    const auto& dims = member(entry, "shape").items();
    for (size_t i = 0; i < dims.size(); ++i)
    {
        if (dims[i].is_number())
            spec.shape.push_back(dims[i].as_int());
        else
        {
            (dims[i].as_string() == contract::kBatch ? spec.batch_axis : spec.grow_axis) = static_cast<int>(i);
            spec.shape.push_back(-1);
        }
    }
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
    // the contract's check list (rnnx/runtime/contract/artifact.py): step 1, the file
    if (!is_dir(directory))
        throw refusal(RNNX_ERROR_IO, directory, "no_directory");
    const std::string where = directory + "/" + std::string(contract::kMetadataFile);
    if (!is_file(where))
        throw refusal(RNNX_ERROR_METADATA, where, "missing_file");
    std::ifstream in(where, std::ios::binary);
    if (!in)
        throw refusal(RNNX_ERROR_METADATA, where, "unreadable_file", {{"detail", std::strerror(errno)}});
    std::stringstream text;
    text << in.rdbuf();
    Artifact art;
    try
    {
        art.metadata = parse_json(text.str());
    }
    catch (const JsonError& e)
    {
        std::string detail = e.what();
        const std::string prefix = "invalid JSON ";
        if (detail.compare(0, prefix.size(), prefix) == 0)
            detail.erase(0, prefix.size());
        throw refusal(RNNX_ERROR_METADATA, where, "not_json", {{"detail", detail}});
    }
    // steps 2 to 5: the document, its fields, the graph, a causal_lm layout (the only interface run here)
    check_metadata(art.metadata, where);
    // step 6: what this reader needs beyond the schema: a signature (its state files carry it), the files' sha256s
    const Json& meta = art.metadata;
    const Json* signature = meta.find("signature");
    if (signature == nullptr)
        throw refusal(RNNX_ERROR_METADATA, where, "no_signature");
    art.signature = signature->as_string();
    art.directory = directory;
    art.model_path = directory + "/" + member(meta, "model_file").as_string();
    check_hash(art.model_path, member(meta, "model_sha256").as_string(), "model");
    const Json* external = meta.find("external_data");
    if (external != nullptr && !external->is_null())
        check_hash(
            directory + "/" + member(*external, "file").as_string(), member(*external, "sha256").as_string(), "data");
    art.model_type = member(meta, "model_type").as_string();
    art.target = member(meta, "target").as_string();
    const auto target = std::find_if(std::begin(kTargets), std::end(kTargets),
        [&](const TargetRecord& record) { return record.name == art.target; });
    if (target == std::end(kTargets))
        throw Error(RNNX_ERROR_METADATA, where + ": unknown target '" + art.target + "'");
    art.target_record = *target;
    art.precision = member(meta, "precision").as_string();
    art.vocab_size = member(meta, "vocab_size").as_int();
    for (const Json& t : member(meta, "inputs").items())
        art.input_names.push_back(member(t, "name").as_string());
    for (const Json& t : member(meta, "outputs").items())
        art.output_names.push_back(member(t, "name").as_string());
    art.logits_dtype = member(member(meta, "outputs").items()[0], "dtype").as_string();
    for (const Json& s : member(meta, "state").items())
        art.states.push_back(read_state(s));
    return art;
}

} // namespace rnnx
