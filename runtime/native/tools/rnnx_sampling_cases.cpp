// rnnx_sampling_cases CASES.json: runs the sampling conformance cases (tests/data/sampling_cases.json, made from
// rnnx/runtime/sampling.py) through the C runtime's sampler and prints, per case, what it drew: a JSON array
// with {"tokens": [[row 0's draws], ...]} or {"error": message}. tests/test_sampling_conformance.py compares
// them with the file. A filter given as null is passed as 0, the C API's spelling of "absent".
#include "error.h"
#include "json.h"
#include "sampling.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace
{

rnnx::Json run_case(const rnnx::Json& c)
{
    rnnx::SamplingOptions options;
    options.temperature = c.find("temperature")->as_number();
    const rnnx::Json* top_k = c.find("top_k");
    options.top_k = top_k->is_null() ? 0 : top_k->as_int();
    const rnnx::Json* top_p = c.find("top_p");
    options.top_p = top_p->is_null() ? 0.0 : top_p->as_number();
    const uint64_t seed = static_cast<uint64_t>(c.find("seed")->as_int());
    const int64_t draws = c.find("draws")->as_int();
    rnnx::Json out = rnnx::Json::object();
    try
    {
        rnnx::check_sampling(options);
    }
    catch (const rnnx::Error& error)
    {
        out.set("error", rnnx::Json::string(error.what()));
        return out;
    }
    rnnx::Json rows = rnnx::Json::array();
    uint64_t b = 0;
    for (const rnnx::Json& row : c.find("logits")->items())
    {
        std::vector<float> logits;
        for (const rnnx::Json& x : row.items())
            logits.push_back(static_cast<float>(x.as_number()));
        rnnx::RowGenerator rng(seed, b++);
        rnnx::Json tokens = rnnx::Json::array();
        for (int64_t i = 0; i < draws; ++i)
            tokens.push(rnnx::Json::number(static_cast<double>(
                rnnx::sample_row(logits.data(), static_cast<int64_t>(logits.size()), options, rng))));
        rows.push(std::move(tokens));
    }
    out.set("tokens", std::move(rows));
    return out;
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2)
    {
        std::fprintf(stderr, "usage: rnnx_sampling_cases CASES.json\n");
        return 2;
    }
    std::ifstream file(argv[1]);
    if (!file)
    {
        std::fprintf(stderr, "rnnx_sampling_cases: cannot read %s\n", argv[1]);
        return 2;
    }
    std::stringstream text;
    text << file.rdbuf();
    try
    {
        const rnnx::Json document = rnnx::parse_json(text.str());
        rnnx::Json results = rnnx::Json::array();
        for (const rnnx::Json& c : document.find("cases")->items())
            results.push(run_case(c));
        std::cout << results.dump() << "\n";
    }
    catch (const std::exception& error)
    {
        std::fprintf(stderr, "rnnx_sampling_cases: %s\n", error.what());
        return 1;
    }
    return 0;
}
