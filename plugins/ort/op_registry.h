// The library's op list, filled by the ops themselves: each op's plugins/<op>/ort/<op>_op.cpp says
//
//     RNNX_ORT_REGISTER_OP(rnnx_ort::MyOp);   // template <typename T> using MyOp = CpuOp<MyKernel, T>;
//
// whose static registrar adds the op for every activation dtype (fp32, fp16, bf16, fp64) to op_registry() when the
// library is loaded; RegisterCustomOps (rnnx_ort_ops.cpp) adds them to the "rnnx" domain, sorted by op name. A
// dtype without a kernel would make a graph invalid once the library is registered, so an op comes in all four.
#pragma once

#include "ort_op_support.h"

#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace rnnx_ort
{
// One op of the library, for every activation dtype.
class RegisteredOp
{
public:
    virtual ~RegisteredOp() = default;
    // The ONNX op type.
    virtual const char* name() const = 0;
    virtual void add_to(Ort::CustomOpDomain& domain) = 0;
};

template <template <typename> class Op> class EveryDtype final : public RegisteredOp
{
public:
    const char* name() const override
    {
        return fp32.GetName();
    }
    void add_to(Ort::CustomOpDomain& domain) override
    {
        domain.Add(&fp32);
        domain.Add(&fp16);
        domain.Add(&bf16);
        domain.Add(&fp64);
    }

private:
    Op<float> fp32;
    Op<Ort::Float16_t> fp16;
    Op<Ort::BFloat16_t> bf16;
    Op<double> fp64;
};

// What the registrars filled by the time ORT calls RegisterCustomOps: the ops, in load order, and the first error
// a registrar caught (an exception may not escape a static initialiser; RegisterCustomOps reports it).
struct OpRegistry
{
    std::vector<std::unique_ptr<RegisteredOp>> ops;
    std::string error;
};

// The one registry of the library (a function-local static, so a registrar of any file may run first).
OpRegistry& op_registry();

template <template <typename> class Op> struct OpRegistrar
{
    OpRegistrar() noexcept
    {
        try
        {
            op_registry().ops.push_back(std::make_unique<EveryDtype<Op>>());
        }
        catch (const std::exception& e)
        {
            if (op_registry().error.empty())
                op_registry().error = e.what();
        }
    }
};
} // namespace rnnx_ort

#define RNNX_ORT_REGISTER_CONCAT_(a, b) a##b
#define RNNX_ORT_REGISTER_CONCAT(a, b) RNNX_ORT_REGISTER_CONCAT_(a, b)
// Registers Op (an op template of the activation dtype, a CpuOp of ort_op_support.h) with the library; at namespace
// scope, once per op.
#define RNNX_ORT_REGISTER_OP(Op)                                                                                       \
    static const ::rnnx_ort::OpRegistrar<Op> RNNX_ORT_REGISTER_CONCAT(rnnx_ort_registrar_, __LINE__)
