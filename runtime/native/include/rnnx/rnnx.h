/*
 * rnnx native runtime: a C API over an rnnx export directory (model.onnx + rnnx.json).
 *
 * One export, any model: the state tensors, their names, shapes and batch axes come from rnnx.json, so every
 * export works (the shipped language models and a user's own, "causal_lm" interface). The state stays in the
 * backend's values between calls (ONNX Runtime values; TensorRT device buffers).
 *
 * Errors: every function that can fail returns an rnnx_status; RNNX_OK is 0. The message of the last failure
 * on the calling thread is rnnx_last_error() (valid until the thread's next rnnx call), its reason
 * rnnx_last_error_reason() when it is a refusal of the artifact contract. No C++ exception crosses this API.
 *
 * Lifetimes: a state belongs to the model that made it; free every state (rnnx_state_free) before closing the
 * model (rnnx_model_close).
 *
 * NULL: rnnx_model_open's `options` may be NULL (every default); `sampling` may be NULL wherever it is taken
 * (greedy); rnnx_step's `active` may be NULL (every row active); rnnx_generate's `callback` and `state` may be
 * NULL, and `stop_tokens` when num_stop_tokens is 0. The getters (rnnx_model_vocab_size, rnnx_model_describe,
 * rnnx_state_batch, rnnx_state_past_length) return 0 / "" for NULL, and the free functions (rnnx_model_close,
 * rnnx_state_free, rnnx_sampler_free) do nothing for NULL. Any other NULL pointer argument is
 * RNNX_ERROR_INVALID_ARGUMENT.
 *
 * Threads: an rnnx_model may be used from several threads at once (prefill / step / generate on different
 * states); an rnnx_state must be used by one thread at a time. rnnx_last_error() is per thread.
 *
 * Shapes: tokens are row-major int64; logits are float32 (batch, vocab_size), row b being the logits after
 * row b's last real token.
 */
#ifndef RNNX_H
#define RNNX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

#if defined(_WIN32)
#define RNNX_API __declspec(dllexport)
#else
#define RNNX_API __attribute__((visibility("default")))
#endif

    typedef enum rnnx_status
    {
        RNNX_OK = 0,
        RNNX_ERROR_INVALID_ARGUMENT = 1, /* a bad argument: null pointer, token out of range, batch mismatch */
        RNNX_ERROR_IO = 2,               /* a file or directory that cannot be read or written */
        RNNX_ERROR_METADATA = 3,         /* rnnx.json missing, malformed, unsupported, or not matching the model */
        RNNX_ERROR_STATE_FILE = 4,       /* a state file that is not one, is truncated or is from another model */
        RNNX_ERROR_BACKEND = 5,          /* the backend failed (ONNX Runtime / TensorRT error text in the message) */
        RNNX_ERROR_UNAVAILABLE = 6,      /* a backend or device this build or machine does not have */
        RNNX_ERROR_INTERNAL = 7
    } rnnx_status;

    typedef struct rnnx_model rnnx_model;
    typedef struct rnnx_state rnnx_state;
    typedef struct rnnx_sampler rnnx_sampler;

    /* Options of rnnx_model_open; zero-initialise, then set what you need (NULL / 0 = default). */
    typedef struct rnnx_open_options
    {
        const char* backend;            /* "onnxruntime" (default) or "tensorrt" (see rnnx_model_open) */
        const char* device;             /* onnxruntime: "cpu" (default) or "cuda" (ONNX Runtime's CUDA EP);
                                           tensorrt: "cuda" (default, device 0) or "cuda:N" */
        const char* ort_ops_library;    /* librnnx_ort_ops.so (native rnnx ops); NULL: $RNNX_ORT_OPS, else the one
                                           beside librnnx_runtime.so if there; "": none */
        const char* trt_plugin_library; /* librnnx_trt_plugins.so (TensorRT backend), loaded once per process; NULL
                                           or "": none (the export's plugin creators must then be registered) */
        const char* trt_engine;         /* the serialized engine (TensorRT backend): rnnx.runtime.tensorrt's
                                           build_engine(DIR), or `export-model ... --target tensorrt --engine` */
        int32_t intra_op_threads;       /* ONNX Runtime intra-op threads; 0: ONNX Runtime's default */
    } rnnx_open_options;

    /* Sampling (docs/sampling.md, the same in Python and JavaScript): temperature 0 is greedy (argmax, first of
     * ties); else divide by the temperature, keep the top_k (<= 0: off), keep the top_p nucleus (0 or 1: off),
     * renormalise, draw. Row b draws from its own generator, numpy's PCG64 seeded by (seed, b), so a row's tokens
     * do not depend on the other rows and equal Python's and JavaScript's for the same seed. A zero-initialised
     * struct is greedy with no filter. temperature finite and >= 0, top_p in [0, 1]
     * (RNNX_ERROR_INVALID_ARGUMENT else). */
    typedef struct rnnx_sampling
    {
        float temperature;
        int32_t top_k;
        float top_p;
        uint64_t seed;
    } rnnx_sampling;

    /* Called by rnnx_generate for each new token of each row still generating, in order: step 0 (the tokens
     * sampled from the prompt's logits) rows 0..batch-1, then step 1, and so on; `step` is that index, so a
     * row's step-th token is its (step+1)-th new one. Return 0 to go on; non-zero stops the whole generation at
     * once: the callback is never called again (not for the step's later rows either) and rnnx_generate
     * returns RNNX_OK. Runs on the calling thread. */
    typedef int (*rnnx_token_callback)(void* user_data, int64_t row, int64_t step, int64_t token);

    RNNX_API const char* rnnx_version(void);
    RNNX_API const char* rnnx_last_error(void);
    /* The stable reason of the calling thread's last failure when it is a refusal of the artifact contract (a bad
     * rnnx.json or state file: a key of rnnx/runtime/contract/artifact.py's REFUSALS, e.g. "field_type", the same
     * that Python's MetadataError.reason and JavaScript's RnnxError.reason give for it); "" for any other failure
     * and after a success. */
    RNNX_API const char* rnnx_last_error_reason(void);

    /* Opens an export directory: checks rnnx.json as the artifact contract says (the same checks, order and
     * refusals as Python's read_metadata and JavaScript's checkMetadata: format and version, the interface
     * (causal_lm), every field, the graph and its causal_lm layout), then its signature and the model's (and its
     * external data's) sha256, then creates the backend. `options`: NULL for the defaults.
     *
     * backend "tensorrt": a library built without the TensorRT backend (no TensorRT / CUDA headers at build
     * time) returns RNNX_ERROR_UNAVAILABLE for any tensorrt open. One built with it checks the arguments first
     * (RNNX_ERROR_INVALID_ARGUMENT for an export of another target, no trt_engine, or a device other than
     * "cuda" / "cuda:N"), then loads libnvinfer.so.<the TensorRT major of its headers> and the CUDA runtime
     * once per process: the folders of $RNNX_TENSORRT_LIBS (colon-separated) first, then the pip wheels'
     * folders in the site-packages above librnnx_runtime.so (tensorrt_libs/; nvidia/cu13/lib,
     * nvidia/cuda_runtime/lib), then the loader's search by soname, then unversioned libnvinfer.so /
     * libcudart.so. RNNX_ERROR_UNAVAILABLE when none loads (the message lists what was tried), when the
     * libnvinfer found is of another major version than the headers' or, with TensorRT 10 headers, older than
     * 10.7 (one line naming it: a build serves 10.7 to 10.x with 10 headers, 11.x with 11's), or when the
     * device does not exist. The plugin library is loaded into TensorRT's process-wide registry once per
     * process: opening the same export again, or one whose plugin creators Python or the application already
     * registered, loads nothing; before it is loaded, a library built for another TensorRT major than the one
     * loaded (its rnnx_trt_plugins_tensorrt_major()), or that does not say, is RNNX_ERROR_BACKEND naming both
     * majors and the command that builds the right one. An engine whose optimization profiles are not 0 =
     * decode (sequence length 1), 1 = prefill is RNNX_ERROR_METADATA naming the file and what they hold.
     * Every call that touches the device makes options.device the calling thread's CUDA device for its
     * duration (cudaSetDevice), then restores the thread's previous device. */
    RNNX_API rnnx_status rnnx_model_open(const char* export_dir, const rnnx_open_options* options, rnnx_model** out);
    RNNX_API void rnnx_model_close(rnnx_model* model);
    RNNX_API int64_t rnnx_model_vocab_size(const rnnx_model* model);
    /* One line: backend, device, model type, precision, vocab size. Owned by the model. */
    RNNX_API const char* rnnx_model_describe(const rnnx_model* model);

    /* A fresh (all-zero) state of `batch` rows. */
    RNNX_API rnnx_status rnnx_state_new(rnnx_model* model, int64_t batch, rnnx_state** out);
    RNNX_API void rnnx_state_free(rnnx_state* state);
    RNNX_API int64_t rnnx_state_batch(const rnnx_state* state);
    /* Positions fed so far (pads included). */
    RNNX_API int64_t rnnx_state_past_length(const rnnx_state* state);
    /* An independent deep copy. */
    RNNX_API rnnx_status rnnx_state_fork(const rnnx_state* state, rnnx_state** out);
    /* The logits after each row's last real token, (batch, vocab_size) float32, owned by the state; NULL
     * (and RNNX_ERROR_INVALID_ARGUMENT) before the first prefill. */
    RNNX_API rnnx_status rnnx_state_logits(const rnnx_state* state, const float** logits);
    /* safetensors: the state tensors as state/<name>, last_logits, and the header fields (format, names,
     * batch, past_length, the model signature) in its metadata; the same file rnnx.runtime (Python) writes. */
    RNNX_API rnnx_status rnnx_state_save(const rnnx_state* state, const char* path);
    /* Reads a state file: its header is checked as Python checks it (the contract's STATE_HEADER: format, version,
     * fields, then this model's signature; RNNX_ERROR_STATE_FILE with the same refusal), then its tensors. */
    RNNX_API rnnx_status rnnx_state_load(rnnx_model* model, const char* path, rnnx_state** out);

    /* Feeds prompts: tokens (batch, width) row-major, row b's first lengths[b] entries are its prompt
     * (1 <= lengths[b] <= width; the rest is ignored). Continues `state`, whose batch must be `batch`. */
    RNNX_API rnnx_status rnnx_prefill(rnnx_model* model, rnnx_state* state, const int64_t* tokens,
        const int64_t* lengths, int64_t batch, int64_t width);
    /* One token per row (tokens: batch entries); active (batch entries, NULL: all) 0 feeds that row as a pad:
     * its state and its logits stay as they were, and its entry in `tokens` is ignored (any value). */
    RNNX_API rnnx_status rnnx_step(rnnx_model* model, rnnx_state* state, const int64_t* tokens, const uint8_t* active);
    /* A sampler for `batch` rows: one generator per row, seeded by (sampling->seed, row). */
    RNNX_API rnnx_status rnnx_sampler_new(const rnnx_sampling* sampling, int64_t batch, rnnx_sampler** out);
    RNNX_API void rnnx_sampler_free(rnnx_sampler* sampler);
    /* The next token of every row from the state's logits (tokens: batch entries); advances the generators. */
    RNNX_API rnnx_status rnnx_sample(rnnx_sampler* sampler, const rnnx_state* state, int64_t* tokens);

    /* Prefill, then up to max_new_tokens tokens per row: each row stops after a token in stop_tokens (which
     * is reported) or at max_new_tokens; finished rows are fed as pads; a callback returning non-zero stops
     * every row. `callback` may be NULL. On return `state` (when non-NULL) receives the generation's state
     * (free it with rnnx_state_free): it has been fed the prompt and every reported token but the last
     * step's, whose logits it holds; to continue, rnnx_step the last reported tokens (pads for the rows that
     * had stopped before that step). */
    RNNX_API rnnx_status rnnx_generate(rnnx_model* model, const int64_t* tokens, const int64_t* lengths, int64_t batch,
        int64_t width, int64_t max_new_tokens, const rnnx_sampling* sampling, const int64_t* stop_tokens,
        int64_t num_stop_tokens, rnnx_token_callback callback, void* user_data, rnnx_state** state);

#ifdef __cplusplus
}
#endif

#endif /* RNNX_H */
