// Next-token choice from logits, as docs/sampling.md specifies and rnnx/runtime/sampling.py (the reference)
// computes: divide by the temperature, keep the top-k (a threshold: ties at the k-th value are kept), keep the
// top-p nucleus (the smallest set of most likely tokens whose probability reaches p; the most likely is always
// kept), renormalise, draw from the row's own generator: numpy's PCG64 seeded through SeedSequence by
// (seed, row), so that a seed gives the tokens Python and JavaScript give. Temperature 0 is greedy: argmax,
// the first of ties. tests/data/sampling_cases.json holds the cases all three runtimes run.
#pragma once

#include <cstdint>
#include <vector>

namespace rnnx
{

// The four 64-bit words numpy's SeedSequence(entropy).generate_state(4, np.uint64) gives, for entropy a list of
// non-negative integers (each split into 32-bit words, least significant first).
std::vector<uint64_t> seed_sequence_state(const std::vector<uint64_t>& entropy);

// numpy's PCG64 (128-bit LCG, XSL-RR output) seeded by SeedSequence([seed, row]): uniform() draws what
// np.random.default_rng([seed, row]).random() draws.
class RowGenerator
{
public:
    RowGenerator(uint64_t seed, uint64_t row);
    // The next 64 random bits.
    uint64_t next();
    // Uniform in [0, 1): (next() >> 11) * 2^-53.
    double uniform();

private:
    unsigned __int128 state_ = 0;
    unsigned __int128 increment_ = 0;
};

// The options after their "off" forms are resolved (docs/sampling.md): top_k <= 0 is off, top_p 0 or 1 is off.
struct SamplingOptions
{
    double temperature = 1.0;
    int64_t top_k = 0;  // <= 0: no top-k filter
    double top_p = 1.0; // 0 or 1: no top-p filter
};

// Throws Error naming the bad option: temperature finite and >= 0, top_p in [0, 1].
void check_sampling(const SamplingOptions& options);

// The index of the largest logit (the first of ties).
int64_t argmax(const float* logits, int64_t vocab);

// One token from `logits` (vocab entries).
int64_t sample_row(const float* logits, int64_t vocab, const SamplingOptions& options, RowGenerator& rng);

} // namespace rnnx
