// Vectorisable float / double math for rnnx's CPU kernels (the SRU scan, the causal linear attention):
// no library calls, so that loops over a block of values vectorise. No torch, no ORT here.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace rnnx::vmath
{

// exp without library calls, so that loops over a block vectorise. exp(x) = 2^n * e^r with
// n = round(x / ln 2) and |r| <= ln(2) / 2; e^r by its Taylor series (degree 7 for float,
// 13 for double: truncation below half an ulp), 2^n assembled in the exponent bits. n is
// rounded by adding 1.5 * 2^mantissa_bits, which leaves n in the low bits of the sum.
// |x| is clamped to a limit with a normal, finite result; NaN passes through.
template <typename acc_t> struct ExpTraits;

template <> struct ExpTraits<float>
{
    using bits_t = int32_t;
    static constexpr float limit = 87.0f;
    static constexpr float shifter = 12582912.0f; // 1.5 * 2^23
    static constexpr bits_t shifter_bits = 0x4B400000, bias = 127, mantissa_bits = 23;
    static constexpr float ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-06f;
    static constexpr int degree = 7;
};

template <> struct ExpTraits<double>
{
    using bits_t = int64_t;
    static constexpr double limit = 708.0;
    static constexpr double shifter = 6755399441055744.0; // 1.5 * 2^52
    static constexpr bits_t shifter_bits = 0x4338000000000000LL, bias = 1023, mantissa_bits = 52;
    static constexpr double ln2_hi = 0.693147180369123816490, ln2_lo = 1.90821492927058770002e-10;
    static constexpr int degree = 13;
};

template <typename T, typename F> inline T bit_cast_to(F v)
{
    static_assert(sizeof(T) == sizeof(F), "bit_cast_to: sizes differ");
    T out;
    std::memcpy(&out, &v, sizeof(T));
    return out;
}

// x with |x| limited to `limit`; NaN unchanged. Done on the bit pattern with integer selects:
// GCC turns the float compare-and-select form into a far slower vector sequence.
template <typename acc_t, typename bits_t> inline acc_t clamp_magnitude(acc_t x, acc_t limit)
{
    const bits_t bits = bit_cast_to<bits_t>(x);
    const bits_t sign = bits & std::numeric_limits<bits_t>::min();
    const bits_t mag = bits ^ sign;
    const bits_t lim = bit_cast_to<bits_t>(limit);
    const bits_t inf = bit_cast_to<bits_t>(std::numeric_limits<acc_t>::infinity());
    const bits_t clamped = mag > inf ? mag : (mag < lim ? mag : lim);
    return bit_cast_to<acc_t>(static_cast<bits_t>(clamped | sign));
}

// 1 + r/I * (1 + r/(I+1) * (... (1 + r/DEG))): Horner form of the Taylor series of e^r.
template <typename acc_t, int I, int DEG> inline acc_t taylor_exp(acc_t r)
{
    if constexpr (I > DEG)
    {
        return acc_t(1);
    }
    else
    {
        return acc_t(1) + r * (acc_t(1) / acc_t(I)) * taylor_exp<acc_t, I + 1, DEG>(r);
    }
}

template <typename acc_t> inline acc_t vexp(acc_t x)
{
    using E = ExpTraits<acc_t>;
    using bits_t = typename E::bits_t;
    x = clamp_magnitude<acc_t, bits_t>(x, E::limit);
    const acc_t shifted = x * acc_t(1.44269504088896340736) + E::shifter;
    const acc_t n = shifted - E::shifter;
    const acc_t r = (x - n * E::ln2_hi) - n * E::ln2_lo;
    const acc_t poly = taylor_exp<acc_t, 1, E::degree>(r);
    const bits_t e = bit_cast_to<bits_t>(shifted) - E::shifter_bits + E::bias;
    return poly * bit_cast_to<acc_t>(static_cast<bits_t>(e << E::mantissa_bits));
}

template <typename acc_t> inline acc_t sigmoid(acc_t z)
{
    return acc_t(1) / (acc_t(1) + vexp(-z));
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error a few ulp of 1.
template <typename acc_t> inline acc_t vtanh(acc_t z)
{
    return acc_t(1) - acc_t(2) / (vexp(acc_t(2) * z) + acc_t(1));
}

// phi(x) = elu(x) + 1 = x + 1 for x > 0, else exp(x): the feature map of the causal linear attention.
template <typename acc_t> inline acc_t elu_plus_one(acc_t x)
{
    const acc_t e = vexp(x);
    return x > acc_t(0) ? x + acc_t(1) : e;
}

} // namespace rnnx::vmath
