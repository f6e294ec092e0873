/*
 * Build-time shape checks on TensorRT's symbolic extents (IDimensionExpr), for the plugins' getOutputShapes.
 *
 * At build time an extent is either a constant (known for every profile shape) or an expression TensorRT only
 * evaluates at run time. These helpers refuse only what is certainly wrong: two extents that are both constant and
 * differ, or a constant extent that does not fit the plugin's fields. Anything symbolic passes here and is checked
 * on the concrete shapes by onShapeChange.
 */
#pragma once

#include <NvInferRuntime.h>

#include <cstdint>

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

} // namespace plugin
} // namespace rnnx
