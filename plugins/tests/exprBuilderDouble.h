/*
 * Test double of TensorRT's IExprBuilder / IDimensionExpr.
 *
 * TensorRT gives a plugin's getOutputShapes an IExprBuilder that only the TensorRT library can create; no
 * real one exists without it. This double implements the same interface (the public classes forward to the
 * apiv::VExprBuilder / apiv::VDimensionExpr implementation interfaces, which the double provides) and writes
 * every expression as text, so tests can check output shapes for symbolic dimensions: symbol("L") is "L",
 * constants fold, other operations print as "(a+b)", "(a*b)", ...
 */
#pragma once

#include <NvInferRuntime.h>

#include <deque>
#include <limits>
#include <memory>
#include <string>

namespace rnnx
{
namespace test
{

class TestDimExpr : public nvinfer1::IDimensionExpr
{
public:
    TestDimExpr(std::string text, bool constant, int64_t value)
        : mDouble(constant, value)
        , mText(std::move(text))
    {
        mImpl = &mDouble;
    }
    ~TestDimExpr() override = default;

    std::string const& text() const
    {
        return mText;
    }

private:
    class Impl : public nvinfer1::apiv::VDimensionExpr
    {
    public:
        Impl(bool constant, int64_t value)
            : mConstant(constant)
            , mValue(value)
        {
        }
        bool isConstant() const override
        {
            return mConstant;
        }
        int64_t getConstantValue() const override
        {
            return mConstant ? mValue : std::numeric_limits<int64_t>::min();
        }
        bool isSizeTensor() const override
        {
            return false;
        }

    private:
        bool mConstant;
        int64_t mValue;
    };

    Impl mDouble;
    std::string mText;
};

//! Text of an expression made by TestExprBuilder ("?" for nullptr).
inline std::string exprText(nvinfer1::IDimensionExpr const* e)
{
    return e != nullptr ? static_cast<TestDimExpr const*>(e)->text() : "?";
}

class TestExprBuilder : public nvinfer1::IExprBuilder
{
public:
    TestExprBuilder()
        : mDouble(*this)
    {
        mImpl = &mDouble;
    }
    ~TestExprBuilder() override = default;

    //! A symbolic dimension (a dynamic extent TensorRT would know only at run time).
    nvinfer1::IDimensionExpr const* symbol(std::string const& name)
    {
        mExprs.push_back(std::make_unique<TestDimExpr>(name, false, 0));
        return mExprs.back().get();
    }

    nvinfer1::IDimensionExpr const* make(std::string text, bool constant, int64_t value)
    {
        mExprs.push_back(std::make_unique<TestDimExpr>(std::move(text), constant, value));
        return mExprs.back().get();
    }

private:
    class Impl : public nvinfer1::apiv::VExprBuilder
    {
    public:
        explicit Impl(TestExprBuilder& owner)
            : mOwner(owner)
        {
        }
        nvinfer1::IDimensionExpr const* constant(int64_t value) override
        {
            return mOwner.make(std::to_string(value), true, value);
        }
        nvinfer1::IDimensionExpr const* operation(nvinfer1::DimensionOperation op,
            nvinfer1::IDimensionExpr const& first, nvinfer1::IDimensionExpr const& second) override
        {
            static char const* const kSymbols[] = {"+", "*", " max ", " min ", "-", "==", "<", "/", " cdiv "};
            auto const index = static_cast<int32_t>(op);
            if (index < 0 || index > 8)
            {
                return nullptr;
            }
            if (first.isConstant() && second.isConstant())
            {
                int64_t const a = first.getConstantValue();
                int64_t const b = second.getConstantValue();
                int64_t const values[] = {a + b, a * b, a > b ? a : b, a < b ? a : b, a - b, a == b, a < b,
                    b != 0 ? a / b : 0, b != 0 ? (a + b - 1) / b : 0};
                return constant(values[index]);
            }
            return mOwner.make("(" + exprText(&first) + kSymbols[index] + exprText(&second) + ")", false, 0);
        }
        nvinfer1::IDimensionExpr const* declareSizeTensor(
            int32_t, nvinfer1::IDimensionExpr const&, nvinfer1::IDimensionExpr const&) override
        {
            return nullptr;
        }

    private:
        TestExprBuilder& mOwner;
    };

    Impl mDouble;
    std::deque<std::unique_ptr<TestDimExpr>> mExprs;
};

} // namespace test
} // namespace rnnx
