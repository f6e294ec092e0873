// Next-token choice from logits, in the order rnnx/runtime/sampling.py documents: divide by the temperature,
// keep the top-k (a threshold: ties at the k-th value are kept), keep the top-p nucleus (the smallest set of
// most likely tokens whose probability reaches p; the most likely is always kept), renormalise, draw from the
// row's own generator. Temperature 0 is greedy: argmax, the first of ties.
#pragma once

#include <cstdint>
#include <vector>

namespace rnnx
{

// xoshiro256** seeded through splitmix64 from (seed, row): reproducible across runs and platforms.
class RowGenerator
{
public:
    RowGenerator(uint64_t seed, uint64_t row);
    // Uniform in [0, 1), 53 bits.
    double uniform();

private:
    uint64_t next();
    uint64_t s_[4];
};

struct SamplingOptions
{
    double temperature = 1.0;
    int64_t top_k = 0; // 0: no top-k filter
    double top_p = 1.0;
};

// Throws Error naming the bad option: temperature finite and >= 0, top_k >= 0, 0 < top_p <= 1.
void check_sampling(const SamplingOptions& options);

// The index of the largest logit (the first of ties).
int64_t argmax(const float* logits, int64_t vocab);

// One token from `logits` (vocab entries).
int64_t sample_row(const float* logits, int64_t vocab, const SamplingOptions& options, RowGenerator& rng);

} // namespace rnnx
