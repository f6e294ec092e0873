#include "sampling.h"

#include "error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace rnnx
{
namespace
{

uint64_t splitmix64(uint64_t& x)
{
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

} // namespace

RowGenerator::RowGenerator(uint64_t seed, uint64_t row)
{
    uint64_t x = seed ^ (row * 0xD1B54A32D192ED03ull);
    for (auto& word : s_)
        word = splitmix64(x);
}

uint64_t RowGenerator::next()
{
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double RowGenerator::uniform()
{
    return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
}

void check_sampling(const SamplingOptions& options)
{
    if (!std::isfinite(options.temperature) || options.temperature < 0)
        throw Error(RNNX_ERROR_INVALID_ARGUMENT,
            "temperature must be a finite number >= 0, got " + std::to_string(options.temperature));
    if (options.top_k < 0)
        throw Error(
            RNNX_ERROR_INVALID_ARGUMENT, "top_k must be >= 1 (0: no filter), got " + std::to_string(options.top_k));
    if (!(options.top_p > 0.0 && options.top_p <= 1.0))
        throw Error(RNNX_ERROR_INVALID_ARGUMENT, "top_p must be in (0, 1], got " + std::to_string(options.top_p));
}

int64_t argmax(const float* logits, int64_t vocab)
{
    int64_t best = 0;
    for (int64_t v = 1; v < vocab; ++v)
        if (logits[v] > logits[best])
            best = v;
    return best;
}

int64_t sample_row(const float* logits, int64_t vocab, const SamplingOptions& options, RowGenerator& rng)
{
    if (options.temperature == 0)
        return argmax(logits, vocab);
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> scaled(static_cast<size_t>(vocab));
    for (int64_t v = 0; v < vocab; ++v)
        scaled[static_cast<size_t>(v)] = static_cast<double>(logits[v]) / options.temperature;
    if (options.top_k > 0 && options.top_k < vocab)
    {
        std::vector<double> sorted = scaled;
        std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<double>());
        const double kth = sorted[static_cast<size_t>(options.top_k - 1)];
        for (double& x : scaled)
            if (x < kth)
                x = -inf;
    }
    auto softmax = [&](const std::vector<double>& x)
    {
        const double top = *std::max_element(x.begin(), x.end());
        std::vector<double> p(x.size());
        double sum = 0;
        for (size_t i = 0; i < x.size(); ++i)
            sum += (p[i] = std::exp(x[i] - top));
        for (double& value : p)
            value /= sum;
        return p;
    };
    if (options.top_p < 1.0)
    {
        std::vector<int64_t> order(static_cast<size_t>(vocab));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scaled[static_cast<size_t>(a)] > scaled[static_cast<size_t>(b)]; });
        const std::vector<double> probs = softmax(scaled);
        double before = 0;
        std::vector<bool> keep(static_cast<size_t>(vocab), false);
        for (int64_t i : order)
        {
            keep[static_cast<size_t>(i)] = before < options.top_p;
            before += probs[static_cast<size_t>(i)];
        }
        for (int64_t v = 0; v < vocab; ++v)
            if (!keep[static_cast<size_t>(v)])
                scaled[static_cast<size_t>(v)] = -inf;
    }
    const std::vector<double> probs = softmax(scaled);
    std::vector<double> cdf(probs.size());
    std::partial_sum(probs.begin(), probs.end(), cdf.begin());
    const double u = rng.uniform() * cdf.back();
    int64_t token = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    token = std::min(token, vocab - 1);
    while (token > 0 && probs[static_cast<size_t>(token)] == 0.0)
        --token;
    return token;
}

} // namespace rnnx
