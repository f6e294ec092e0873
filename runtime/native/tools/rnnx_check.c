/* rnnx_check: the C API's test driver (C, so the header is checked as C too). tests/test_native_runtime.py
 * runs it, also built with AddressSanitizer and UndefinedBehaviorSanitizer.
 *
 *     rnnx_check open DIR                  open an export (default options); prints "status <code>: <message>"
 *                                          and, when it opened, rnnx_model_describe
 *     rnnx_check tensorrt DIR ENGINE [DEVICE]
 *                                          open it with the TensorRT backend (options.device: DEVICE, else NULL)
 *     rnnx_check token DIR OPS             prefill a token past the vocabulary
 *     rnnx_check batch DIR OPS             prefill / sample with a batch that does not match the state
 *     rnnx_check load DIR OPS FILE         load a state file
 *     rnnx_check threads DIR OPS STEPS     4 threads generate on one model at once; prints "threads: same" when
 *                                          every thread's tokens equal the same generation run alone
 *     rnnx_check fork DIR OPS              prefill (its status), then: a fork continues independently of its
 *                                          parent; prints "fork: ok"
 *     rnnx_check stop DIR OPS K            greedy rnnx_generate of 3 rows whose callback returns 1 on its K-th call;
 *                                          prints "calls: N, status S, past_length P" (N == K: never called again)
 *     rnnx_check refusals DIR...           open each DIR (default options), one line each:
 * "<status>\t<reason>\t<message>" (reason: rnnx_last_error_reason(); message "ok" when it opened); the bad-artifact
 * fixtures of tests/test_contract_schema.py, in one process rnnx_check refusals-load DIR OPS FILE... load each state
 * FILE into DIR's model, one line each as above
 *
 * OPS is librnnx_ort_ops.so or "-" for none. */
#include "rnnx/rnnx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void report(rnnx_status status)
{
    printf("status %d: %s\n", (int)status, status == RNNX_OK ? "ok" : rnnx_last_error());
}

/* One line: status, the refusal's reason and the message, tab-separated (a message is one line without tabs). */
static void report_reason(rnnx_status status)
{
    printf("%d\t%s\t%s\n", (int)status, rnnx_last_error_reason(), status == RNNX_OK ? "ok" : rnnx_last_error());
}

static rnnx_model* open_model(const char* dir, const char* ops)
{
    rnnx_open_options options;
    memset(&options, 0, sizeof(options));
    options.ort_ops_library = strcmp(ops, "-") == 0 ? "" : ops;
    rnnx_model* model = NULL;
    rnnx_status status = rnnx_model_open(dir, &options, &model);
    if (status != RNNX_OK)
    {
        report(status);
        exit(1);
    }
    return model;
}

#define THREADS 4
#define MAX_STEPS 64

/* What the token callback saw: the first MAX_STEPS tokens and the number of calls; it asks to stop at call stop_at. */
typedef struct
{
    int64_t tokens[MAX_STEPS];
    int64_t count;
    int64_t calls;
    int64_t stop_at;
} Tokens;

static int record(void* user, int64_t row, int64_t step, int64_t token)
{
    Tokens* seen = (Tokens*)user;
    (void)row;
    (void)step;
    if (seen->count < MAX_STEPS)
        seen->tokens[seen->count++] = token;
    return ++seen->calls >= seen->stop_at;
}

typedef struct
{
    rnnx_model* model;
    int64_t prompt[3];
    int64_t steps;
    Tokens out;
    rnnx_status status;
} Job;

static void* run_job(void* arg)
{
    Job* job = (Job*)arg;
    const int64_t length = 3;
    rnnx_sampling greedy = {0.0f, 0, 1.0f, 0};
    job->out.count = 0;
    job->status =
        rnnx_generate(job->model, job->prompt, &length, 1, 3, job->steps, &greedy, NULL, 0, record, &job->out, NULL);
    return NULL;
}

int main(int argc, char** argv)
{
    if (argc < 3)
    {
        fprintf(stderr, "usage: rnnx_check CASE DIR [args]\n");
        return 2;
    }
    const char* what = argv[1];
    const char* dir = argv[2];
    if (strcmp(what, "open") == 0)
    {
        rnnx_model* model = NULL;
        report(rnnx_model_open(dir, NULL, &model));
        if (model != NULL)
            printf("%s\n", rnnx_model_describe(model));
        rnnx_model_close(model);
        return 0;
    }
    if (strcmp(what, "refusals") == 0)
    {
        for (int i = 2; i < argc; ++i)
        {
            rnnx_model* model = NULL;
            report_reason(rnnx_model_open(argv[i], NULL, &model));
            rnnx_model_close(model);
        }
        return 0;
    }
    if (strcmp(what, "tensorrt") == 0 && argc > 3)
    {
        rnnx_open_options options;
        memset(&options, 0, sizeof(options));
        options.backend = "tensorrt";
        options.trt_engine = argv[3];
        options.device = argc > 4 ? argv[4] : NULL;
        rnnx_model* model = NULL;
        report(rnnx_model_open(dir, &options, &model));
        rnnx_model_close(model);
        return 0;
    }
    if (argc < 4)
        return 2;
    rnnx_model* model = open_model(dir, argv[3]);
    const int64_t vocab = rnnx_model_vocab_size(model);
    rnnx_state* state = NULL;
    if (strcmp(what, "token") == 0)
    {
        int64_t tokens[2] = {1, vocab + 5};
        int64_t length = 2;
        rnnx_state_new(model, 1, &state);
        report(rnnx_prefill(model, state, tokens, &length, 1, 2));
    }
    else if (strcmp(what, "batch") == 0)
    {
        int64_t tokens[2] = {1, 2};
        int64_t length = 2;
        rnnx_state_new(model, 2, &state);
        report(rnnx_prefill(model, state, tokens, &length, 1, 2));
        rnnx_sampler* sampler = NULL;
        rnnx_sampling greedy = {0.0f, 0, 1.0f, 0};
        rnnx_sampler_new(&greedy, 3, &sampler);
        int64_t out[3];
        report(rnnx_sample(sampler, state, out));
        rnnx_sampler_free(sampler);
    }
    else if (strcmp(what, "load") == 0 && argc > 4)
    {
        report(rnnx_state_load(model, argv[4], &state));
    }
    else if (strcmp(what, "refusals-load") == 0)
    {
        for (int i = 4; i < argc; ++i)
        {
            rnnx_state* loaded = NULL;
            report_reason(rnnx_state_load(model, argv[i], &loaded));
            rnnx_state_free(loaded);
        }
    }
    else if (strcmp(what, "threads") == 0 && argc > 4)
    {
        Job alone[THREADS], together[THREADS];
        pthread_t threads[THREADS];
        for (int i = 0; i < THREADS; ++i)
        {
            Job job = {model, {1 + i, 2 + i, 10}, atoi(argv[4]), {{0}, 0, 0, INT64_MAX}, RNNX_OK};
            if (job.steps > MAX_STEPS)
                job.steps = MAX_STEPS;
            alone[i] = job;
            together[i] = job;
            run_job(&alone[i]);
        }
        for (int i = 0; i < THREADS; ++i)
            pthread_create(&threads[i], NULL, run_job, &together[i]);
        for (int i = 0; i < THREADS; ++i)
            pthread_join(threads[i], NULL);
        int same = 1;
        for (int i = 0; i < THREADS; ++i)
        {
            const Tokens* a = &alone[i].out;
            const Tokens* b = &together[i].out;
            same = same && alone[i].status == RNNX_OK && together[i].status == RNNX_OK && a->count == b->count
                && a->count == alone[i].steps && memcmp(a->tokens, b->tokens, (size_t)a->count * sizeof(int64_t)) == 0;
        }
        printf("threads: %s\n", same ? "same" : "differ");
    }
    else if (strcmp(what, "fork") == 0)
    {
        int64_t tokens[3] = {1, 2, 10};
        int64_t length = 3, next = 3;
        rnnx_state* copy = NULL;
        const float *a = NULL, *b = NULL;
        rnnx_state_new(model, 1, &state);
        const rnnx_status fed = rnnx_prefill(model, state, tokens, &length, 1, 3);
        report(fed);
        if (fed != RNNX_OK)
        {
            rnnx_state_free(state);
            rnnx_model_close(model);
            return 1;
        }
        rnnx_state_fork(state, &copy);
        rnnx_step(model, state, &next, NULL);
        rnnx_state_logits(state, &a);
        float* after_parent = malloc((size_t)vocab * sizeof(float));
        memcpy(after_parent, a, (size_t)vocab * sizeof(float));
        rnnx_state_logits(copy, &b);
        int untouched = memcmp(after_parent, b, (size_t)vocab * sizeof(float)) != 0; /* the fork did not step */
        rnnx_step(model, copy, &next, NULL);
        rnnx_state_logits(copy, &b);
        int same_step = memcmp(after_parent, b, (size_t)vocab * sizeof(float)) == 0;
        int past = rnnx_state_past_length(copy) == 4 && rnnx_state_past_length(state) == 4;
        printf("fork: %s\n", untouched && same_step && past ? "ok" : "broken");
        free(after_parent);
        rnnx_state_free(copy);
    }
    else if (strcmp(what, "stop") == 0 && argc > 4)
    {
        int64_t tokens[9] = {1, 2, 10, 3, 4, 10, 5, 6, 10};
        int64_t lengths[3] = {3, 3, 3};
        Tokens stopper = {{0}, 0, 0, atoi(argv[4])};
        const rnnx_status status =
            rnnx_generate(model, tokens, lengths, 3, 3, 16, NULL, NULL, 0, record, &stopper, &state);
        printf("calls: %lld, status %d, past_length %lld\n", (long long)stopper.calls, (int)status,
            (long long)rnnx_state_past_length(state));
    }
    else
    {
        fprintf(stderr, "rnnx_check: unknown case %s\n", what);
        rnnx_model_close(model);
        return 2;
    }
    rnnx_state_free(state);
    rnnx_model_close(model);
    return 0;
}
