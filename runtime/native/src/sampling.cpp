#include "sampling.h"

#include "error.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace rnnx
{
namespace
{

// SeedSequence's hashing and mixing constants (numpy's documented algorithm).
constexpr int kPoolSize = 4;
constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;

// PCG64's 128-bit multiplier.
constexpr unsigned __int128 kPcgMultiplier =
    (static_cast<unsigned __int128>(0x2360ed051fc65da4ull) << 64) | 0x4385df649fccf645ull;

uint32_t mix(uint32_t x, uint32_t y)
{
    const uint32_t result = kMixMultL * x - kMixMultR * y;
    return result ^ (result >> 16);
}

// numpy's pairwise summation (what ndarray.sum does along a contiguous axis): blocks of up to 128 summed in 8
// lanes, larger spans halved (at a multiple of 8).
double pairwise_sum(const double* values, size_t n)
{
    if (n < 8)
    {
        double sum = 0.0;
        for (size_t i = 0; i < n; ++i)
            sum += values[i];
        return sum;
    }
    if (n <= 128)
    {
        double r[8];
        std::copy(values, values + 8, r);
        size_t i = 8;
        for (; i < n - (n % 8); i += 8)
            for (size_t j = 0; j < 8; ++j)
                r[j] += values[i + j];
        double sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; ++i)
            sum += values[i];
        return sum;
    }
    size_t half = n / 2;
    half -= half % 8;
    return pairwise_sum(values, half) + pairwise_sum(values + half, n - half);
}

// Softmax in float64 in numpy's operation order: subtract the max, exp, divide by the pairwise sum.
std::vector<double> softmax(const std::vector<double>& x)
{
    const double top = *std::max_element(x.begin(), x.end());
    std::vector<double> e(x.size());
    for (size_t i = 0; i < x.size(); ++i)
        e[i] = std::exp(x[i] - top);
    const double total = pairwise_sum(e.data(), e.size());
    for (double& value : e)
        value /= total;
    return e;
}

} // namespace

std::vector<uint64_t> seed_sequence_state(const std::vector<uint64_t>& entropy)
{
    std::vector<uint32_t> words;
    for (uint64_t value : entropy)
    {
        do
        {
            words.push_back(static_cast<uint32_t>(value & 0xffffffffu));
            value >>= 32;
        } while (value != 0);
    }
    uint32_t hash_const = kInitA;
    auto hashmix = [&](uint32_t value)
    {
        value ^= hash_const;
        hash_const *= kMultA;
        value *= hash_const;
        return value ^ (value >> 16);
    };
    uint32_t pool[kPoolSize];
    for (int i = 0; i < kPoolSize; ++i)
        pool[i] = hashmix(static_cast<size_t>(i) < words.size() ? words[static_cast<size_t>(i)] : 0u);
    for (int src = 0; src < kPoolSize; ++src)
        for (int dst = 0; dst < kPoolSize; ++dst)
            if (src != dst)
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
    for (size_t src = kPoolSize; src < words.size(); ++src)
        for (int dst = 0; dst < kPoolSize; ++dst)
            pool[dst] = mix(pool[dst], hashmix(words[src]));
    uint32_t hash_b = kInitB;
    uint32_t out32[2 * kPoolSize];
    for (int i = 0; i < 2 * kPoolSize; ++i)
    {
        uint32_t value = pool[i % kPoolSize] ^ hash_b;
        hash_b *= kMultB;
        value *= hash_b;
        out32[i] = value ^ (value >> 16);
    }
    std::vector<uint64_t> out(kPoolSize);
    for (int i = 0; i < kPoolSize; ++i)
        out[static_cast<size_t>(i)] = out32[2 * i] | (static_cast<uint64_t>(out32[2 * i + 1]) << 32);
    return out;
}

RowGenerator::RowGenerator(uint64_t seed, uint64_t row)
{
    const std::vector<uint64_t> words = seed_sequence_state({seed, row});
    const unsigned __int128 initial = (static_cast<unsigned __int128>(words[0]) << 64) | words[1];
    increment_ = (((static_cast<unsigned __int128>(words[2]) << 64) | words[3]) << 1) | 1u;
    state_ = 0;
    state_ = state_ * kPcgMultiplier + increment_;
    state_ += initial;
    state_ = state_ * kPcgMultiplier + increment_;
}

uint64_t RowGenerator::next()
{
    state_ = state_ * kPcgMultiplier + increment_;
    const uint64_t value = static_cast<uint64_t>(state_ >> 64) ^ static_cast<uint64_t>(state_);
    const unsigned rotation = static_cast<unsigned>(state_ >> 122);
    return (value >> rotation) | (value << ((64u - rotation) & 63u));
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
    if (!(options.top_p >= 0.0 && options.top_p <= 1.0))
        throw Error(
            RNNX_ERROR_INVALID_ARGUMENT, "top_p must be in [0, 1] (0 or 1: off), got " + std::to_string(options.top_p));
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
    const size_t n = static_cast<size_t>(vocab);
    std::vector<double> scaled(n);
    for (size_t v = 0; v < n; ++v)
        scaled[v] = static_cast<double>(logits[v]) / options.temperature;
    if (options.top_k > 0 && options.top_k < vocab)
    {
        std::vector<double> sorted = scaled;
        std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<double>());
        const double kth = sorted[static_cast<size_t>(options.top_k - 1)];
        for (double& x : scaled)
            if (x < kth)
                x = -inf;
    }
    if (options.top_p > 0.0 && options.top_p < 1.0)
    {
        std::vector<size_t> order(n);
        std::iota(order.begin(), order.end(), size_t{0});
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scaled[a] > scaled[b]; });
        const std::vector<double> probs = softmax(scaled);
        // As numpy: the running sum in sorted order, minus the token's own probability, is the mass before it.
        double running = 0;
        std::vector<bool> keep(n, false);
        for (size_t i : order)
        {
            running += probs[i];
            keep[i] = running - probs[i] < options.top_p;
        }
        for (size_t v = 0; v < n; ++v)
            if (!keep[v])
                scaled[v] = -inf;
    }
    const std::vector<double> probs = softmax(scaled);
    std::vector<double> cdf(n);
    std::partial_sum(probs.begin(), probs.end(), cdf.begin());
    const double u = rng.uniform() * cdf.back();
    int64_t token = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    token = std::min(token, vocab - 1);
    while (token > 0 && probs[static_cast<size_t>(token)] == 0.0) // rounding can land on a zero-probability tail
        --token;
    return token;
}

} // namespace rnnx
