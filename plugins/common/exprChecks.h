/*
 * Build-time shape checks on TensorRT's symbolic extents (IDimensionExpr), for the plugins' getOutputShapes, and
 * Extents, a view of build-time and run-time extents alike, for checks that serve getOutputShapes and onShapeChange.
 *
 * At build time an extent is either a constant (known for every profile shape) or an expression TensorRT only
 * evaluates at run time. These helpers refuse only what is certainly wrong: two extents that are both constant and
 * differ, or a constant extent that does not fit the plugin's fields. Anything symbolic passes here and is checked
 * on the concrete shapes by onShapeChange.
 */
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace rnnx
{
namespace plugin
{

//! Whether `e` is a known constant extent.
inline bool isConstantDim(nvinfer1::IDimensionExpr const* e) noexcept
{
    return e != nullptr && e->isConstant();
}

//! True unless `a` and `b` are both constant and differ (the same expression object is always equal).
inline bool dimsMayMatch(nvinfer1::IDimensionExpr const* a, nvinfer1::IDimensionExpr const* b) noexcept
{
    return a == b || !isConstantDim(a) || !isConstantDim(b) || a->getConstantValue() == b->getConstantValue();
}

//! True unless `a` is constant and differs from `value`.
inline bool dimMayBe(nvinfer1::IDimensionExpr const* a, int64_t value) noexcept
{
    return !isConstantDim(a) || a->getConstantValue() == value;
}

//! True unless `a` is constant and `a * factor` differs from the constant `b` (e.g. S0's E times H against q's H*E).
inline bool dimTimesMayMatch(
    nvinfer1::IDimensionExpr const* a, int64_t factor, nvinfer1::IDimensionExpr const* b) noexcept
{
    return !isConstantDim(a) || !isConstantDim(b) || a->getConstantValue() * factor == b->getConstantValue();
}

//! True unless `a` is constant and not a positive multiple of `divisor` (> 0).
inline bool dimMayBeMultipleOf(nvinfer1::IDimensionExpr const* a, int64_t divisor) noexcept
{
    return !isConstantDim(a) || (a->getConstantValue() > 0 && a->getConstantValue() % divisor == 0);
}

//! The product of all of `e`'s extents when every one is constant, else -1.
inline int64_t constantVolume(nvinfer1::DimsExprs const& e) noexcept
{
    int64_t v = 1;
    for (int32_t i = 0; i < e.nbDims; ++i)
    {
        if (!isConstantDim(e.d[i]))
        {
            return -1;
        }
        v *= e.d[i]->getConstantValue();
    }
    return v;
}

//! One tensor's extents as the shape checks read them: at build time (DimsExprs) an extent is known when it is a
//! constant (isConstantDim), at run time (Dims) every extent is known. The same checks serve getOutputShapes and
//! onShapeChange, so the build refuses exactly the constant extents the runtime would refuse.
class Extents
{
public:
    Extents() noexcept = default;
    explicit Extents(nvinfer1::DimsExprs const& e) noexcept
        : mRank(e.nbDims)
    {
        for (int32_t i = 0; i < e.nbDims && i < nvinfer1::Dims::MAX_DIMS; ++i)
        {
            mExpr[i] = e.d[i];
            mKnown[i] = isConstantDim(e.d[i]);
            mValue[i] = mKnown[i] ? e.d[i]->getConstantValue() : -1;
        }
    }
    explicit Extents(nvinfer1::Dims const& d) noexcept
        : mRank(d.nbDims)
    {
        for (int32_t i = 0; i < d.nbDims && i < nvinfer1::Dims::MAX_DIMS; ++i)
        {
            mKnown[i] = true;
            mValue[i] = d.d[i];
        }
    }

    int32_t rank() const noexcept
    {
        return mRank;
    }
    bool known(int32_t i) const noexcept
    {
        return mKnown[i];
    }
    int64_t value(int32_t i) const noexcept
    {
        return mValue[i];
    }
    //! False only when extent i is known and not `v`.
    bool mayBe(int32_t i, int64_t v) const noexcept
    {
        return !mKnown[i] || mValue[i] == v;
    }
    //! False only when extent i is known and not a positive multiple of `divisor`.
    bool mayBeMultipleOf(int32_t i, int64_t divisor) const noexcept
    {
        return !mKnown[i] || (mValue[i] > 0 && mValue[i] % divisor == 0);
    }
    //! False only when extent i and `other`'s extent j are both known and differ (one expression is always equal).
    bool mayMatch(int32_t i, Extents const& other, int32_t j) const noexcept
    {
        if (mExpr[i] != nullptr && other.mExpr[j] != nullptr)
        {
            return dimsMayMatch(mExpr[i], other.mExpr[j]);
        }
        return !mKnown[i] || !other.mKnown[j] || mValue[i] == other.mValue[j];
    }
    //! "(2, ?, 64)": "?" for an extent not known yet.
    std::string text() const
    {
        std::string s = "(";
        for (int32_t i = 0; i < mRank && i < nvinfer1::Dims::MAX_DIMS; ++i)
        {
            s += (i > 0 ? ", " : "") + (mKnown[i] ? std::to_string(mValue[i]) : std::string("?"));
        }
        return s + ")";
    }

private:
    int32_t mRank{0};
    nvinfer1::IDimensionExpr const* mExpr[nvinfer1::Dims::MAX_DIMS]{};
    bool mKnown[nvinfer1::Dims::MAX_DIMS]{};
    int64_t mValue[nvinfer1::Dims::MAX_DIMS]{};
};

//! The extents of a plugin's first `n` inputs (at most kMAX_INPUTS), held in place: enqueue's shape recheck
//! allocates nothing. Built from DimsExprs (build time) or PluginTensorDesc (run time).
class InputExtents
{
public:
    static constexpr int32_t kMAX_INPUTS{8};

    InputExtents(nvinfer1::DimsExprs const* inputs, int32_t n) noexcept
    {
        for (int32_t i = 0; i < n && i < kMAX_INPUTS; ++i)
        {
            mAll[i] = Extents(inputs[i]);
        }
    }
    InputExtents(nvinfer1::PluginTensorDesc const* inputs, int32_t n) noexcept
    {
        for (int32_t i = 0; i < n && i < kMAX_INPUTS; ++i)
        {
            mAll[i] = Extents(inputs[i].dims);
        }
    }

    Extents const& operator[](int32_t i) const noexcept
    {
        return mAll[i];
    }
    Extents const* data() const noexcept
    {
        return mAll;
    }

private:
    Extents mAll[kMAX_INPUTS]{};
};

//! Sets `error` to "<tensor> (input <pos>) is <got>, expected <expected>"; false (a shape check's refusal).
inline bool wrongInput(
    std::string& error, char const* tensor, int32_t pos, Extents const& got, std::string const& expected)
{
    error = std::string(tensor) + " (input " + std::to_string(pos) + ") is " + got.text() + ", expected " + expected;
    return false;
}

} // namespace plugin
} // namespace rnnx
