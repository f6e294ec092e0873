// rnnx-generate: prints the tokens an rnnx export generates for one or more prompts, through the C API only.
//
//     rnnx-generate EXPORT_DIR --prompt "1 2 3" [--prompt "4 5"] [--max-new-tokens 16] [--temperature 0]
//                   [--top-k K] [--top-p P] [--seed S] [--stop TOKEN] [--ort-ops librnnx_ort_ops.so]
//                   [--backend onnxruntime|tensorrt] [--device cpu|cuda] [--engine PLAN] [--plugins LIB]
//                   [--save-state PATH] [--load-state PATH] [--time]
//
// Prints one line per row, "row <b>: <token> <token> ...". --load-state continues a saved state (its prompts
// are already fed) instead of feeding prompts; --save-state saves the state after generating. --time adds a
// line with the median decode-step latency in microseconds. Exit status 1 with the error on stderr.
#include "rnnx/rnnx.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace
{

struct Args
{
    std::string dir;
    std::vector<std::vector<int64_t>> prompts;
    int64_t max_new_tokens = 16;
    rnnx_sampling sampling{0.0f, 0, 1.0f, 0};
    std::vector<int64_t> stops;
    rnnx_open_options open{};
    std::string backend, device, ort_ops, engine, plugins, save_state, load_state;
    bool time = false;
};

[[noreturn]] void usage(const char* message)
{
    std::fprintf(stderr, "rnnx-generate: %s\nusage: rnnx-generate EXPORT_DIR --prompt \"1 2 3\" [options]\n", message);
    std::exit(2);
}

// The Args member an option that takes a text value sets, nullptr for another option.
std::string Args::* text_option(const std::string& arg)
{
    static const std::pair<const char*, std::string Args::*> options[] = {
        {"--ort-ops", &Args::ort_ops},
        {"--backend", &Args::backend},
        {"--device", &Args::device},
        {"--engine", &Args::engine},
        {"--plugins", &Args::plugins},
        {"--save-state", &Args::save_state},
        {"--load-state", &Args::load_state},
    };
    for (const auto& [name, member] : options)
        if (arg == name)
            return member;
    return nullptr;
}

// A --prompt's token ids: "1 2 3", "1,2,3" or "1, 2, 3" (docs/embedding.md, "Prompts"; the same rule as Python's
// and JavaScript's). Exits with one line naming the bad piece, or an empty prompt. An id past INT64_MAX is read as
// INT64_MAX, which the runtime refuses as out of vocabulary.
std::vector<int64_t> parse_prompt(const std::string& text)
{
    static const char separators[] = " \t\r\n,";
    const std::string syntax = " (token ids are non-negative integers separated by spaces and/or commas)";
    std::vector<int64_t> tokens;
    for (size_t start = text.find_first_not_of(separators); start != std::string::npos;
        start = text.find_first_not_of(separators, start))
    {
        const size_t end = std::min(text.find_first_of(separators, start), text.size());
        const std::string piece = text.substr(start, end - start);
        if (piece.find_first_not_of("0123456789") != std::string::npos)
            usage(("prompt \"" + text + "\": \"" + piece + "\" is not a token id" + syntax).c_str());
        tokens.push_back(std::strtoll(piece.c_str(), nullptr, 10)); // saturates at INT64_MAX
        start = end;
    }
    if (tokens.empty())
        usage(("prompt \"" + text + "\": no token ids" + syntax).c_str());
    return tokens;
}

Args parse(int argc, char** argv)
{
    Args a;
    for (int i = 1; i < argc; ++i)
    {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string
        {
            if (i + 1 >= argc)
                usage((arg + " needs a value").c_str());
            return argv[++i];
        };
        if (arg == "--prompt")
            a.prompts.push_back(parse_prompt(value()));
        else if (arg == "--max-new-tokens")
            a.max_new_tokens = std::stoll(value());
        else if (arg == "--temperature")
            a.sampling.temperature = std::stof(value());
        else if (arg == "--top-k")
            a.sampling.top_k = std::stoi(value());
        else if (arg == "--top-p")
            a.sampling.top_p = std::stof(value());
        else if (arg == "--seed")
            a.sampling.seed = std::stoull(value());
        else if (arg == "--stop")
            a.stops.push_back(std::stoll(value()));
        else if (std::string Args::* text = text_option(arg))
            a.*text = value();
        else if (arg == "--time")
            a.time = true;
        else if (!arg.empty() && arg[0] == '-')
            usage(("unknown option " + arg).c_str());
        else if (a.dir.empty())
            a.dir = arg;
        else
            usage("one export directory");
    }
    if (a.dir.empty())
        usage("no export directory");
    if (a.prompts.empty() == a.load_state.empty())
        usage("give --prompt (one per row) or --load-state");
    auto c = [](const std::string& s) { return s.empty() ? nullptr : s.c_str(); };
    a.open.backend = c(a.backend);
    a.open.device = c(a.device);
    a.open.ort_ops_library = c(a.ort_ops);
    a.open.trt_engine = c(a.engine);
    a.open.trt_plugin_library = c(a.plugins);
    return a;
}

void check(rnnx_status status)
{
    if (status != RNNX_OK)
    {
        std::fprintf(stderr, "rnnx-generate: %s\n", rnnx_last_error());
        std::exit(1);
    }
}

struct Rows
{
    std::vector<std::vector<int64_t>> tokens;
};

int collect(void* user, int64_t row, int64_t, int64_t token)
{
    static_cast<Rows*>(user)->tokens[static_cast<size_t>(row)].push_back(token);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    const Args a = parse(argc, argv);
    rnnx_model* model = nullptr;
    check(rnnx_model_open(a.dir.c_str(), &a.open, &model));
    rnnx_state* state = nullptr;
    Rows rows;
    std::vector<double> step_us;
    if (!a.prompts.empty())
    {
        const int64_t batch = static_cast<int64_t>(a.prompts.size());
        int64_t width = 0;
        for (const auto& p : a.prompts)
            width = std::max<int64_t>(width, static_cast<int64_t>(p.size()));
        std::vector<int64_t> tokens(static_cast<size_t>(batch * std::max<int64_t>(width, 1)), 0), lengths;
        for (int64_t b = 0; b < batch; ++b)
        {
            std::copy(a.prompts[b].begin(), a.prompts[b].end(), tokens.begin() + b * width);
            lengths.push_back(static_cast<int64_t>(a.prompts[b].size()));
        }
        rows.tokens.resize(static_cast<size_t>(batch));
        if (!a.time)
            check(rnnx_generate(model, tokens.data(), lengths.data(), batch, width, a.max_new_tokens, &a.sampling,
                a.stops.data(), static_cast<int64_t>(a.stops.size()), collect, &rows, &state));
        else
        {
            check(rnnx_state_new(model, batch, &state));
            check(rnnx_prefill(model, state, tokens.data(), lengths.data(), batch, width));
        }
    }
    else
        check(rnnx_state_load(model, a.load_state.c_str(), &state));
    if (a.time || !a.load_state.empty())
    {
        // A plain decode loop on the C API: sample, step, repeat (what rnnx_generate does, timed).
        const int64_t batch = rnnx_state_batch(state);
        rows.tokens.assign(static_cast<size_t>(batch), {});
        rnnx_sampler* sampler = nullptr;
        check(rnnx_sampler_new(&a.sampling, batch, &sampler));
        std::vector<int64_t> next(static_cast<size_t>(batch));
        for (int64_t i = 0; i < a.max_new_tokens; ++i)
        {
            check(rnnx_sample(sampler, state, next.data()));
            for (int64_t b = 0; b < batch; ++b)
                rows.tokens[static_cast<size_t>(b)].push_back(next[static_cast<size_t>(b)]);
            if (i + 1 == a.max_new_tokens)
                break;
            const auto start = std::chrono::steady_clock::now();
            check(rnnx_step(model, state, next.data(), nullptr));
            step_us.push_back(
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
        }
        rnnx_sampler_free(sampler);
    }
    for (size_t b = 0; b < rows.tokens.size(); ++b)
    {
        std::printf("row %zu:", b);
        for (int64_t t : rows.tokens[b])
            std::printf(" %lld", static_cast<long long>(t));
        std::printf("\n");
    }
    if (a.time && !step_us.empty())
    {
        std::sort(step_us.begin(), step_us.end());
        std::printf("decode step median %.1f us over %zu steps\n", step_us[step_us.size() / 2], step_us.size());
    }
    if (!a.save_state.empty())
        check(rnnx_state_save(state, a.save_state.c_str()));
    rnnx_state_free(state);
    rnnx_model_close(model);
    return 0;
}
