// The C API (include/rnnx/rnnx.h): models, states, prefill / step, sampling, generation, state files. Every
// entry point runs inside `guarded`, which turns any exception into a status and the thread's last error.
#include "artifact.h"
#include "backend.h"
#include "contract.h"
#include "error.h"
#include "safetensors.h"
#include "sampling.h"

#include "rnnx/rnnx.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

using rnnx::Error;

struct rnnx_model
{
    rnnx::Artifact artifact;
    std::unique_ptr<rnnx::Backend> backend;
    std::string description;
};

struct rnnx_state
{
    rnnx_model* model = nullptr;
    std::unique_ptr<rnnx::BackendState> inner;
    int64_t batch = 0;
    int64_t past_length = 0;
    std::vector<float> last_logits; // empty before the first prefill
};

struct rnnx_sampler
{
    rnnx::SamplingOptions options;
    std::vector<rnnx::RowGenerator> rows;
};

namespace
{

// State files: the artifact contract's format (contract_generated.h, from rnnx/runtime/contract/artifact.py).
const std::string kStatePrefix(rnnx::contract::kStateTensorPrefix);
const std::string kLastLogits(rnnx::contract::kStateLastLogits);

thread_local std::string last_error;
thread_local std::string last_reason;

template <typename F> rnnx_status guarded(F&& body)
{
    try
    {
        last_reason.clear();
        body();
        last_error.clear();
        return RNNX_OK;
    }
    catch (const Error& e)
    {
        last_error = e.what();
        last_reason = e.reason();
        return e.status();
    }
    catch (const std::bad_alloc&)
    {
        last_error = "out of memory";
        return RNNX_ERROR_INTERNAL;
    }
    catch (const std::exception& e)
    {
        last_error = std::string("internal error: ") + e.what();
        return RNNX_ERROR_INTERNAL;
    }
    catch (...)
    {
        last_error = "internal error: unknown exception";
        return RNNX_ERROR_INTERNAL;
    }
}

void require(bool condition, const std::string& message)
{
    if (!condition)
        throw Error(RNNX_ERROR_INVALID_ARGUMENT, message);
}

std::string opt(const char* value, const char* fallback)
{
    return value != nullptr && *value ? value : fallback;
}

// The ORT op library to register: the one given ("" for none); else $RNNX_ORT_OPS; else librnnx_ort_ops.so
// beside this library when it is there; else none.
std::string ort_ops_library(const char* given)
{
    if (given != nullptr)
        return given;
    if (const char* env = std::getenv("RNNX_ORT_OPS"))
        return env;
    Dl_info info;
    if (::dladdr(reinterpret_cast<void*>(&rnnx_version), &info) != 0 && info.dli_fname != nullptr)
    {
        std::string path = info.dli_fname;
        path = path.substr(0, path.find_last_of('/') + 1) + "librnnx_ort_ops.so";
        if (FILE* f = std::fopen(path.c_str(), "rb"))
        {
            std::fclose(f);
            return path;
        }
    }
    return "";
}

rnnx::SamplingOptions sampling_options(const rnnx_sampling* sampling)
{
    rnnx::SamplingOptions options;
    if (sampling != nullptr)
    {
        options.temperature = sampling->temperature;
        options.top_k = sampling->top_k;
        options.top_p = sampling->top_p; // 0 and 1 are both off (docs/sampling.md)
    }
    rnnx::check_sampling(options);
    return options;
}

// Runs one call from `state` and updates its logits and past length: rows whose mask is all zero keep theirs.
void feed(rnnx_model* model, rnnx_state* state, const std::vector<int64_t>& ids, const std::vector<int64_t>& mask,
    int64_t width)
{
    const int64_t batch = state->batch, vocab = model->artifact.vocab_size;
    std::vector<float> logits;
    model->backend->run(ids, mask, batch, width, state->inner, logits);
    if (state->last_logits.empty())
        state->last_logits.assign(static_cast<size_t>(batch * vocab), 0.0f);
    for (int64_t b = 0; b < batch; ++b)
    {
        int64_t last = -1;
        for (int64_t t = 0; t < width; ++t)
            if (mask[static_cast<size_t>(b * width + t)])
                last = t;
        if (last >= 0)
            std::memcpy(&state->last_logits[static_cast<size_t>(b * vocab)],
                &logits[static_cast<size_t>((b * width + last) * vocab)], static_cast<size_t>(vocab) * sizeof(float));
    }
    state->past_length += width;
}

void check_state(const rnnx_model* model, const rnnx_state* state)
{
    require(state != nullptr && state->inner != nullptr, "state: null");
    require(state->model == model, "state: belongs to another model");
}

void check_tokens(
    const rnnx_model* model, const int64_t* ids, const std::vector<int64_t>& mask, int64_t batch, int64_t width)
{
    const int64_t vocab = model->artifact.vocab_size;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t t = 0; t < width; ++t)
        {
            const int64_t token = ids[b * width + t];
            if (mask[static_cast<size_t>(b * width + t)] && (token < 0 || token >= vocab))
                throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                    "token " + std::to_string(token) + " at row " + std::to_string(b) + " position " + std::to_string(t)
                        + " is out of range [0, " + std::to_string(vocab) + ")");
        }
}

void prefill(
    rnnx_model* model, rnnx_state* state, const int64_t* tokens, const int64_t* lengths, int64_t batch, int64_t width)
{
    require(model != nullptr, "model: null");
    check_state(model, state);
    require(tokens != nullptr && lengths != nullptr, "tokens / lengths: null");
    require(batch == state->batch,
        "batch mismatch: the state has " + std::to_string(state->batch) + " rows, got " + std::to_string(batch));
    require(width >= 1, "width must be >= 1, got " + std::to_string(width));
    std::vector<int64_t> ids(static_cast<size_t>(batch * width), 0), mask(ids.size(), 0);
    for (int64_t b = 0; b < batch; ++b)
    {
        require(lengths[b] >= 1 && lengths[b] <= width,
            "lengths[" + std::to_string(b) + "] = " + std::to_string(lengths[b])
                + ": every prompt needs 1 to width = " + std::to_string(width) + " tokens");
        for (int64_t t = 0; t < lengths[b]; ++t)
        {
            ids[static_cast<size_t>(b * width + t)] = tokens[b * width + t];
            mask[static_cast<size_t>(b * width + t)] = 1;
        }
    }
    check_tokens(model, ids.data(), mask, batch, width);
    feed(model, state, ids, mask, width);
}

void step(rnnx_model* model, rnnx_state* state, const int64_t* tokens, const uint8_t* active)
{
    require(model != nullptr, "model: null");
    check_state(model, state);
    require(tokens != nullptr, "tokens: null");
    require(!state->last_logits.empty(), "state: no prompt fed yet; call rnnx_prefill first");
    std::vector<int64_t> ids(tokens, tokens + state->batch), mask(static_cast<size_t>(state->batch), 1);
    for (int64_t b = 0; b < state->batch; ++b)
        if (active != nullptr && !active[b])
            ids[static_cast<size_t>(b)] = mask[static_cast<size_t>(b)] = 0;
    check_tokens(model, ids.data(), mask, state->batch, 1);
    feed(model, state, ids, mask, 1);
}

std::unique_ptr<rnnx_state> new_state(rnnx_model* model, int64_t batch)
{
    require(model != nullptr, "model: null");
    require(batch >= 1, "batch must be >= 1, got " + std::to_string(batch));
    auto state = std::make_unique<rnnx_state>();
    state->model = model;
    state->batch = batch;
    state->inner = model->backend->init_state(batch);
    return state;
}

} // namespace

extern "C"
{

    const char* rnnx_version(void)
    {
        return RNNX_VERSION;
    }

    const char* rnnx_last_error(void)
    {
        return last_error.c_str();
    }

    const char* rnnx_last_error_reason(void)
    {
        return last_reason.c_str();
    }

    rnnx_status rnnx_model_open(const char* export_dir, const rnnx_open_options* options, rnnx_model** out)
    {
        return guarded(
            [&]
            {
                require(export_dir != nullptr && out != nullptr, "export_dir / out: null");
                *out = nullptr;
                auto model = std::make_unique<rnnx_model>();
                model->artifact = rnnx::read_artifact(export_dir);
                rnnx::BackendOptions backend_options;
                const rnnx_open_options defaults{};
                const rnnx_open_options& o = options != nullptr ? *options : defaults;
                const std::string backend = opt(o.backend, rnnx::kBackends[0].name.data());
                const auto kind = std::find_if(std::begin(rnnx::kBackends), std::end(rnnx::kBackends),
                    [&](const rnnx::BackendKind& k) { return k.name == backend; });
                if (kind == std::end(rnnx::kBackends))
                    throw Error(RNNX_ERROR_INVALID_ARGUMENT,
                        "backend must be 'onnxruntime' or 'tensorrt', got '" + backend + "'");
                backend_options.device = opt(o.device, kind->default_device);
                backend_options.ort_ops_library = ort_ops_library(o.ort_ops_library);
                backend_options.trt_plugin_library = opt(o.trt_plugin_library, "");
                backend_options.trt_engine = opt(o.trt_engine, "");
                backend_options.intra_op_threads = o.intra_op_threads;
                model->backend = kind->make(model->artifact, backend_options);
                const auto& a = model->artifact;
                model->description = model->backend->describe() + " (" + a.precision + ", " + a.model_type + ", vocab "
                    + std::to_string(a.vocab_size) + ")";
                *out = model.release();
            });
    }

    void rnnx_model_close(rnnx_model* model)
    {
        delete model;
    }

    int64_t rnnx_model_vocab_size(const rnnx_model* model)
    {
        return model != nullptr ? model->artifact.vocab_size : 0;
    }

    const char* rnnx_model_describe(const rnnx_model* model)
    {
        return model != nullptr ? model->description.c_str() : "";
    }

    rnnx_status rnnx_state_new(rnnx_model* model, int64_t batch, rnnx_state** out)
    {
        return guarded(
            [&]
            {
                require(out != nullptr, "out: null");
                *out = new_state(model, batch).release();
            });
    }

    void rnnx_state_free(rnnx_state* state)
    {
        delete state;
    }

    int64_t rnnx_state_batch(const rnnx_state* state)
    {
        return state != nullptr ? state->batch : 0;
    }

    int64_t rnnx_state_past_length(const rnnx_state* state)
    {
        return state != nullptr ? state->past_length : 0;
    }

    rnnx_status rnnx_state_fork(const rnnx_state* state, rnnx_state** out)
    {
        return guarded(
            [&]
            {
                require(state != nullptr && out != nullptr, "state / out: null");
                auto copy = std::make_unique<rnnx_state>();
                copy->model = state->model;
                copy->batch = state->batch;
                copy->past_length = state->past_length;
                copy->last_logits = state->last_logits;
                copy->inner = state->model->backend->copy_state(*state->inner);
                *out = copy.release();
            });
    }

    rnnx_status rnnx_state_logits(const rnnx_state* state, const float** logits)
    {
        return guarded(
            [&]
            {
                require(state != nullptr && logits != nullptr, "state / logits: null");
                *logits = nullptr;
                require(!state->last_logits.empty(), "state: no prompt fed yet, so no logits");
                *logits = state->last_logits.data();
            });
    }

    rnnx_status rnnx_state_save(const rnnx_state* state, const char* path)
    {
        return guarded(
            [&]
            {
                require(state != nullptr && path != nullptr, "state / path: null");
                const rnnx::Artifact& art = state->model->artifact;
                rnnx::SafetensorsFile file;
                rnnx::Json names = rnnx::Json::array();
                const std::vector<rnnx::HostTensor> host = state->model->backend->state_to_host(*state->inner);
                for (size_t i = 0; i < art.states.size(); ++i)
                {
                    names.push(rnnx::Json::string(art.states[i].name));
                    file.tensors.emplace_back(kStatePrefix + art.states[i].name, host[i]);
                }
                if (!state->last_logits.empty())
                {
                    rnnx::HostTensor logits{"float32", {state->batch, art.vocab_size}, {}};
                    const auto* bytes = reinterpret_cast<const uint8_t*>(state->last_logits.data());
                    logits.bytes.assign(bytes, bytes + state->last_logits.size() * sizeof(float));
                    file.tensors.emplace_back(kLastLogits, std::move(logits));
                }
                file.metadata = {{"format", std::string(rnnx::contract::kStateFormat)},
                    {"format_version", std::string(rnnx::contract::kStateFormatVersion)}, {"names", names.dump()},
                    {"batch", std::to_string(state->batch)}, {"past_length", std::to_string(state->past_length)},
                    {"signature", art.signature}, {"backend", "native"}};
                rnnx::write_safetensors(path, file);
            });
    }

    rnnx_status rnnx_state_load(rnnx_model* model, const char* path, rnnx_state** out)
    {
        return guarded(
            [&]
            {
                require(model != nullptr && path != nullptr && out != nullptr, "model / path / out: null");
                *out = nullptr;
                const rnnx::Artifact& art = model->artifact;
                const rnnx::SafetensorsFile file = rnnx::read_safetensors(path);
                // the header in the contract's order (format, version, fields), then the model's signature
                rnnx::check_state_header(file.metadata, path, art.signature);
                const int64_t batch = std::stoll(file.metadata.at("batch"));
                const int64_t past_length = std::stoll(file.metadata.at("past_length"));
                std::vector<rnnx::HostTensor> tensors;
                for (const rnnx::StateSpec& spec : art.states)
                {
                    const rnnx::HostTensor* found = nullptr;
                    for (const auto& named : file.tensors)
                        if (named.first == kStatePrefix + spec.name)
                            found = &named.second;
                    if (found == nullptr)
                        throw Error(
                            RNNX_ERROR_STATE_FILE, std::string(path) + ": state tensor '" + spec.name + "' is missing");
                    const bool ranked = found->shape.size() == spec.shape.size();
                    const std::vector<int64_t> want = spec.concrete(
                        batch, spec.grow_axis >= 0 && ranked ? found->shape[static_cast<size_t>(spec.grow_axis)] : 0);
                    if (found->shape != want || found->dtype != spec.dtype)
                        throw Error(RNNX_ERROR_STATE_FILE,
                            std::string(path) + ": state tensor '" + spec.name + "': expected " + spec.dtype + " "
                                + rnnx::shape_text(want) + ", got " + found->dtype + " "
                                + rnnx::shape_text(found->shape));
                    tensors.push_back(*found);
                }
                auto state = std::make_unique<rnnx_state>();
                state->model = model;
                state->batch = batch;
                state->past_length = past_length;
                state->inner = model->backend->state_from_host(tensors);
                for (const auto& named : file.tensors)
                    if (named.first == kLastLogits)
                    {
                        if (named.second.dtype != "float32"
                            || named.second.shape != std::vector<int64_t>{batch, art.vocab_size})
                            throw Error(RNNX_ERROR_STATE_FILE,
                                std::string(path) + ": last_logits has the wrong shape or dtype");
                        state->last_logits.resize(static_cast<size_t>(batch * art.vocab_size));
                        std::memcpy(state->last_logits.data(), named.second.bytes.data(), named.second.bytes.size());
                    }
                *out = state.release();
            });
    }

    rnnx_status rnnx_prefill(rnnx_model* model, rnnx_state* state, const int64_t* tokens, const int64_t* lengths,
        int64_t batch, int64_t width)
    {
        return guarded([&] { prefill(model, state, tokens, lengths, batch, width); });
    }

    rnnx_status rnnx_step(rnnx_model* model, rnnx_state* state, const int64_t* tokens, const uint8_t* active)
    {
        return guarded([&] { step(model, state, tokens, active); });
    }

    rnnx_status rnnx_sampler_new(const rnnx_sampling* sampling, int64_t batch, rnnx_sampler** out)
    {
        return guarded(
            [&]
            {
                require(out != nullptr, "out: null");
                require(batch >= 1, "batch must be >= 1");
                auto sampler = std::make_unique<rnnx_sampler>();
                sampler->options = sampling_options(sampling);
                const uint64_t seed = sampling != nullptr ? sampling->seed : 0;
                for (int64_t b = 0; b < batch; ++b)
                    sampler->rows.emplace_back(seed, static_cast<uint64_t>(b));
                *out = sampler.release();
            });
    }

    void rnnx_sampler_free(rnnx_sampler* sampler)
    {
        delete sampler;
    }

    rnnx_status rnnx_sample(rnnx_sampler* sampler, const rnnx_state* state, int64_t* tokens)
    {
        return guarded(
            [&]
            {
                require(sampler != nullptr && state != nullptr && tokens != nullptr, "sampler / state / tokens: null");
                require(static_cast<int64_t>(sampler->rows.size()) == state->batch,
                    "batch mismatch: the sampler has " + std::to_string(sampler->rows.size()) + " rows, the state "
                        + std::to_string(state->batch));
                require(!state->last_logits.empty(), "state: no prompt fed yet, so no logits");
                const int64_t vocab = state->model->artifact.vocab_size;
                for (int64_t b = 0; b < state->batch; ++b)
                    tokens[b] = rnnx::sample_row(&state->last_logits[static_cast<size_t>(b * vocab)], vocab,
                        sampler->options, sampler->rows[static_cast<size_t>(b)]);
            });
    }

    rnnx_status rnnx_generate(rnnx_model* model, const int64_t* tokens, const int64_t* lengths, int64_t batch,
        int64_t width, int64_t max_new_tokens, const rnnx_sampling* sampling, const int64_t* stop_tokens,
        int64_t num_stop_tokens, rnnx_token_callback callback, void* user_data, rnnx_state** out)
    {
        return guarded(
            [&]
            {
                require(max_new_tokens >= 0, "max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
                require(num_stop_tokens >= 0 && (num_stop_tokens == 0 || stop_tokens != nullptr), "stop_tokens: null");
                if (out != nullptr)
                    *out = nullptr;
                rnnx_sampler sampler;
                sampler.options = sampling_options(sampling);
                for (int64_t b = 0; b < batch; ++b)
                    sampler.rows.emplace_back(sampling != nullptr ? sampling->seed : 0, static_cast<uint64_t>(b));
                std::unique_ptr<rnnx_state> state = new_state(model, batch);
                prefill(model, state.get(), tokens, lengths, batch, width);
                const std::set<int64_t> stops(stop_tokens, stop_tokens + num_stop_tokens);
                std::vector<uint8_t> active(static_cast<size_t>(batch), 1);
                std::vector<int64_t> next(static_cast<size_t>(batch));
                const int64_t vocab = model->artifact.vocab_size;
                bool stopped = false; // a callback returned non-zero: the generation ends at once
                for (int64_t i = 0; i < max_new_tokens; ++i)
                {
                    for (int64_t b = 0; b < batch && !stopped; ++b)
                    {
                        next[static_cast<size_t>(b)] =
                            rnnx::sample_row(&state->last_logits[static_cast<size_t>(b * vocab)], vocab,
                                sampler.options, sampler.rows[static_cast<size_t>(b)]);
                        stopped = active[static_cast<size_t>(b)] && callback != nullptr
                            && callback(user_data, b, i, next[static_cast<size_t>(b)]) != 0;
                    }
                    if (stopped)
                        break;
                    bool any = false;
                    for (int64_t b = 0; b < batch; ++b)
                    {
                        if (active[static_cast<size_t>(b)] && stops.count(next[static_cast<size_t>(b)]))
                            active[static_cast<size_t>(b)] = 0;
                        any = any || active[static_cast<size_t>(b)];
                    }
                    if (!any || i == max_new_tokens - 1)
                        break;
                    step(model, state.get(), next.data(), active.data());
                }
                if (out != nullptr)
                    *out = state.release();
            });
    }

} // extern "C"
