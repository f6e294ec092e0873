/*
 * Runtime behaviour: onShapeChange validation and enqueue's arguments to the kernels (recorded by the
 * kernels test double; nothing is launched) for the fixed TensorRT node layouts (SRUScan: six inputs, x a
 * dummy unless read; CausalLinearAttention: six, heads packed), refusal of any other input count, and state outputs in
 * their own buffers (the plugins declare no aliasing; the runtime double-buffers state).
 */
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"

extern "C" nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators);

using namespace rnnx;
using namespace rnnx::test;
using nvinfer1::DataType;

namespace
{

//! Distinct fake device addresses.
void* address(uintptr_t i)
{
    return reinterpret_cast<void*>(0x1000 * (i + 1));
}

cudaStream_t const kStream = reinterpret_cast<cudaStream_t>(0xabc0);

} // namespace

TEST_CASE("SRUScan enqueue passes sizes, attributes and pointers; x only when read, mask_pad always")
{
    int32_t const L = 5, B = 3, d = 4;
    for (int32_t matrices : {3, 4})
    {
        for (int32_t skip : {0, 1})
        {
            // int32: what TensorRT gives; bool / uint8: bound by a caller other than TensorRT, read as bytes.
            for (DataType maskType : {DataType::kINT32, DataType::kBOOL, DataType::kUINT8})
            {
                int32_t const D = 2;
                auto plugin = makeSru(d, D, matrices, skip, 1, 0.75F);
                bool const readsX = matrices == 3 && skip == 1;
                // The TensorRT node: U, x (the exporter's 1-element dummy unless read), weight_c, bias, c0, mask_pad.
                std::vector<nvinfer1::PluginTensorDesc> in{desc({L, B, D * d * matrices}, DataType::kHALF),
                    readsX ? desc({L, B, D * d}, DataType::kHALF) : desc({1}, DataType::kHALF),
                    desc({2 * D * d}, DataType::kHALF), desc({2 * D * d}, DataType::kHALF),
                    desc({B, D * d}, DataType::kFLOAT), desc({L, B}, maskType)};
                std::vector<nvinfer1::PluginTensorDesc> out{
                    desc({L, B, D * d}, DataType::kHALF), desc({B, D * d}, DataType::kFLOAT)};
                REQUIRE(plugin->onShapeChange(in.data(), 6, out.data(), 2) == 0);
                std::vector<void const*> inPtr;
                for (int32_t i = 0; i < 6; ++i)
                {
                    inPtr.push_back(address(i));
                }
                // c_last in its own buffer: the plugin declares no aliasing, so TensorRT never binds it to c0.
                void* outPtr[2] = {address(10), address(11)};
                REQUIRE(plugin->enqueue(in.data(), out.data(), inPtr.data(), outPtr, nullptr, kStream) == 0);
                SruScanCall const& call = kernelsDouble().sru;
                CHECK_EQ(call.count, 1);
                CHECK(call.params.length == L && call.params.batch == B && call.params.hidden_size == d);
                CHECK(call.params.num_directions == D && call.params.num_matrices == matrices);
                CHECK(call.params.has_skip_term == (skip == 1) && call.params.use_tanh && call.params.scale_x == 0.75F);
                CHECK(call.type == kernels::DataType::kHALF);
                CHECK(call.U == inPtr[0]);
                CHECK(call.x == (readsX ? inPtr[1] : nullptr));
                CHECK(call.weightC == inPtr[2]);
                CHECK(call.bias == inPtr[3]);
                CHECK(call.c0 == inPtr[4]);
                CHECK(call.maskPad == inPtr[5]);
                CHECK(call.params.mask_type
                    == (maskType == DataType::kINT32 ? kernels::MaskType::kINT32 : kernels::MaskType::kUINT8));
                CHECK(call.h == outPtr[0]);
                CHECK(static_cast<void*>(call.cLast) == outPtr[1]);
                CHECK(call.stream == kStream);
                kernelsDouble() = KernelsDouble{};
            }
        }
    }
}

TEST_CASE("SRUScan onShapeChange rejects shapes that do not match the attributes; a dummy x has any shape")
{
    auto plugin = makeSru(4, 1, 4);
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 2, 4}, DataType::kFLOAT), desc({2, 4}, DataType::kFLOAT)};
    std::vector<nvinfer1::PluginTensorDesc> good{desc({2, 2, 16}, DataType::kFLOAT), desc({1}, DataType::kFLOAT),
        desc({8}, DataType::kFLOAT), desc({8}, DataType::kFLOAT), desc({2, 4}, DataType::kFLOAT),
        desc({2, 2}, DataType::kBOOL)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 6, out.data(), 2), 0);
    for (auto const& dummy : {desc({}, DataType::kFLOAT), desc({7, 3, 5}, DataType::kFLOAT),
             desc({2, 2, 4}, DataType::kFLOAT), desc({0}, DataType::kFLOAT)})
    {
        auto anyX = good;
        anyX[1] = dummy;
        CHECK_EQ(plugin->onShapeChange(anyX.data(), 6, out.data(), 2), 0);
    }
    CHECK_EQ(takeLoggedErrors(), 0);
    auto wrongWidth = good;
    wrongWidth[0] = desc({2, 2, 12}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongWidth.data(), 6, out.data(), 2) != 0);
    auto wrongBatch = good;
    wrongBatch[4] = desc({3, 4}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongBatch.data(), 6, out.data(), 2) != 0);
    auto wrongWeight = good;
    wrongWeight[2] = desc({4}, DataType::kFLOAT);
    CHECK(plugin->onShapeChange(wrongWeight.data(), 6, out.data(), 2) != 0);
    auto wrongMask = good;
    wrongMask[5] = desc({2, 3}, DataType::kUINT8);
    CHECK(plugin->onShapeChange(wrongMask.data(), 6, out.data(), 2) != 0);
    wrongMask[5] = desc({2, 2}, DataType::kUINT8);
    CHECK_EQ(plugin->onShapeChange(wrongMask.data(), 6, out.data(), 2), 0);
    CHECK(takeLoggedErrors() >= 4);
    // The old k = 4 layout without x (U, weight_c, bias, c0[, mask_pad]).
    std::vector<nvinfer1::PluginTensorDesc> old{good[0], good[2], good[3], good[4], good[5]};
    CHECK(plugin->onShapeChange(old.data(), 4, out.data(), 2) != 0);
    CHECK(plugin->onShapeChange(old.data(), 5, out.data(), 2) != 0);
    // With x read (k = 3, skip term), x must be (L, B, D*d).
    auto withX = makeSru(4);
    std::vector<nvinfer1::PluginTensorDesc> k3 = good;
    k3[0] = desc({2, 2, 12}, DataType::kFLOAT);
    k3[1] = desc({2, 2, 4}, DataType::kFLOAT);
    CHECK_EQ(withX->onShapeChange(k3.data(), 6, out.data(), 2), 0);
    k3[1] = desc({1}, DataType::kFLOAT);
    CHECK(withX->onShapeChange(k3.data(), 6, out.data(), 2) != 0);
}

TEST_CASE("SRUScan and CausalLinearAttention refuse the old input counts, naming the expected count")
{
    std::vector<nvinfer1::PluginTensorDesc> in(8, desc({2, 2, 16}, DataType::kFLOAT));
    std::vector<nvinfer1::PluginTensorDesc> out(3, desc({2, 2, 4}, DataType::kFLOAT));
    // onShapeChange with `n` inputs fails, logging `expected` and the count given.
    auto const refusesCount =
        [&](nvinfer1::IPluginV3OneRuntime& plugin, int32_t n, int32_t nbOutputs, std::string const& expected)
    {
        takeLoggedMessages();
        CHECK(plugin.onShapeChange(in.data(), n, out.data(), nbOutputs) != 0);
        std::string const logged = takeLoggedMessages();
        CHECK(logged.find(expected) != std::string::npos);
        CHECK(logged.find("got " + std::to_string(n)) != std::string::npos);
    };
    for (int32_t matrices : {3, 4})
    {
        for (int32_t skip : {0, 1})
        {
            auto plugin = makeSru(4, 1, matrices, skip);
            // 4 / 5: the count-based layouts (x left out, mask_pad optional); 7: one too many.
            for (int32_t n : {4, 5, 7})
            {
                refusesCount(*plugin, n, 2, "SRUScan 'layer': expected exactly 6 inputs");
            }
        }
    }
    auto attention = makeAttention();
    // 3 / 4 / 5: the version 1 layouts (no state, one state tensor, no mask); 7: one too many.
    for (int32_t n : {3, 4, 5, 7})
    {
        refusesCount(*attention, n, 3, "CausalLinearAttention 'layer': expected exactly 6 inputs");
    }
    // The static layouts say the same without a plugin instance.
    plugin::SruScanInputs sruLayout;
    CHECK(!plugin::SruScanPlugin::inputLayout(plugin::SruScanParameters{}, 5, sruLayout));
    CHECK(takeLoggedMessages().find("SRUScan: expected exactly 6 inputs") != std::string::npos);
    REQUIRE(plugin::SruScanPlugin::inputLayout(plugin::SruScanParameters{}, 6, sruLayout));
    CHECK(sruLayout.U == 0 && sruLayout.x == 1 && sruLayout.weightC == 2 && sruLayout.bias == 3);
    CHECK(sruLayout.c0 == 4 && sruLayout.maskPad == 5 && sruLayout.readsX);
    plugin::SruScanParameters k4;
    k4.numMatrices = 4;
    REQUIRE(plugin::SruScanPlugin::inputLayout(k4, 6, sruLayout));
    CHECK(sruLayout.x == 1 && sruLayout.c0 == 4 && !sruLayout.readsX);
    plugin::CausalLinearAttentionInputs attentionLayout;
    CHECK(!plugin::CausalLinearAttentionPlugin::inputLayout(5, attentionLayout));
    CHECK(takeLoggedMessages().find("CausalLinearAttention: expected exactly 6 inputs") != std::string::npos);
    REQUIRE(plugin::CausalLinearAttentionPlugin::inputLayout(6, attentionLayout));
    CHECK(attentionLayout.q == 0 && attentionLayout.k == 1 && attentionLayout.v == 2);
    CHECK(attentionLayout.S0 == 3 && attentionLayout.z0 == 4 && attentionLayout.maskPad == 5);
}

TEST_CASE("SRUScan enqueue reports a kernel error and an unconfigured plugin without crashing")
{
    auto fresh = makeSru(4);
    std::vector<nvinfer1::PluginTensorDesc> in(6, desc({1}, DataType::kFLOAT));
    void const* inPtr[6]{};
    void* outPtr[2]{};
    CHECK(fresh->enqueue(in.data(), in.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK_EQ(kernelsDouble().sru.count, 0);
    auto plugin = makeSru(4, 1, 4);
    std::vector<nvinfer1::PluginTensorDesc> good{desc({2, 2, 16}, DataType::kBF16), desc({1}, DataType::kBF16),
        desc({8}, DataType::kBF16), desc({8}, DataType::kBF16), desc({2, 4}, DataType::kFLOAT),
        desc({2, 2}, DataType::kBOOL)};
    REQUIRE(plugin->onShapeChange(good.data(), 6, good.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    takeLoggedErrors();
    CHECK(plugin->enqueue(good.data(), good.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(kernelsDouble().sru.type == kernels::DataType::kBF16);
    CHECK(takeLoggedErrors() > 0);
}

TEST_CASE("CausalLinearAttention enqueue passes sizes, eps, heads, layout, state and mask pointers, mask type")
{
    int32_t const B = 2, H = 3, L = 7, E = 16, M = 8;
    for (int32_t timeMajor : {0, 1})
    {
        for (DataType maskType : {DataType::kINT32, DataType::kBOOL, DataType::kUINT8})
        {
            int32_t const d0 = timeMajor != 0 ? L : B, d1 = timeMajor != 0 ? B : L;
            auto const q = desc({d0, d1, H * E}, DataType::kFLOAT);
            auto const v = desc({d0, d1, H * M}, DataType::kFLOAT);
            auto const S = desc({B, H, E, M}, DataType::kFLOAT);
            auto const z = desc({B, H, E}, DataType::kFLOAT);
            auto const mask = desc({d0, d1}, maskType);
            // The TensorRT node always lists q, k, v, S0, z0, mask_pad (S0 / z0 zeros when the model gave no state,
            // mask_pad all false without padding); every one goes to the kernel, and S_last / z_last have their own
            // buffers (the plugin declares no aliasing).
            auto plugin = makeAttention(H, 0.5F, timeMajor);
            std::vector<nvinfer1::PluginTensorDesc> in{q, q, v, S, z, mask};
            std::vector<nvinfer1::PluginTensorDesc> out{v, S, z};
            REQUIRE(plugin->onShapeChange(in.data(), 6, out.data(), 3) == 0);
            std::vector<void const*> inPtr;
            for (int32_t i = 0; i < 6; ++i)
            {
                inPtr.push_back(address(i));
            }
            void* outPtr[3] = {address(10), address(11), address(12)};
            kernelsDouble() = KernelsDouble{};
            REQUIRE(plugin->enqueue(in.data(), out.data(), inPtr.data(), outPtr, address(20), kStream) == 0);
            AttentionCall const& call = kernelsDouble().attention;
            CHECK_EQ(call.count, 1);
            CHECK(call.params.batch == B && call.params.heads == H && call.params.length == L);
            CHECK(call.params.dim_k == E && call.params.dim_v == M && call.params.eps == 0.5F);
            CHECK(call.params.time_major == (timeMajor != 0));
            CHECK(call.type == kernels::DataType::kFLOAT);
            CHECK(call.q == inPtr[0] && call.k == inPtr[1] && call.v == inPtr[2]);
            CHECK(static_cast<void const*>(call.S0) == inPtr[3]);
            CHECK(static_cast<void const*>(call.z0) == inPtr[4]);
            CHECK(static_cast<void const*>(call.maskPad) == inPtr[5]);
            CHECK(call.params.mask_type
                == (maskType == DataType::kINT32 ? kernels::MaskType::kINT32 : kernels::MaskType::kUINT8));
            CHECK(call.out == outPtr[0] && call.SLast == outPtr[1] && call.zLast == outPtr[2]);
            // No workspace (the plugin asks for none; the kernels need one only for an aliased z0).
            CHECK(call.workspace == nullptr && call.stream == kStream);
        }
    }
}

TEST_CASE("CausalLinearAttention onShapeChange rejects shapes that do not match num_heads and time_major")
{
    int32_t const B = 2, H = 3, L = 7, E = 16, M = 8;
    auto plugin = makeAttention(H);
    auto const q = desc({B, L, H * E}, DataType::kHALF);
    auto const v = desc({B, L, H * M}, DataType::kHALF);
    auto const S = desc({B, H, E, M}, DataType::kFLOAT);
    auto const z = desc({B, H, E}, DataType::kFLOAT);
    auto const mask = desc({B, L}, DataType::kBOOL);
    std::vector<nvinfer1::PluginTensorDesc> out{v, S, z};
    std::vector<nvinfer1::PluginTensorDesc> const good{q, q, v, S, z, mask};
    CHECK_EQ(plugin->onShapeChange(good.data(), 6, out.data(), 3), 0);
    CHECK_EQ(takeLoggedErrors(), 0);
    auto const rejects = [&](int32_t pos, nvinfer1::PluginTensorDesc const& bad)
    {
        auto in = good;
        in[static_cast<size_t>(pos)] = bad;
        takeLoggedMessages();
        CHECK(plugin->onShapeChange(in.data(), 6, out.data(), 3) != 0);
        CHECK(takeLoggedMessages().find("inconsistent shapes for num_heads 3") != std::string::npos);
    };
    rejects(1, desc({B, L - 1, H * E}, DataType::kHALF)); // k shorter than q
    rejects(2, desc({B + 1, L, H * M}, DataType::kHALF)); // v of another batch
    rejects(0, desc({B, L, H * E + 1}, DataType::kHALF)); // q's last axis not a multiple of num_heads
    rejects(2, desc({B, L, H * M + 2}, DataType::kHALF)); // v's likewise
    rejects(3, desc({B, H, M, E}, DataType::kFLOAT));     // S0 transposed
    rejects(3, desc({B, H + 1, E, M}, DataType::kFLOAT)); // S0 with another head count
    rejects(4, desc({B, H, M}, DataType::kFLOAT));        // z0 of v's head dim
    rejects(5, desc({L, B}, DataType::kBOOL));            // the time-major mask for a batch-first node
    rejects(5, desc({B * L}, DataType::kBOOL));           // a flat mask
    rejects(0, desc({B, H, L, E}, DataType::kHALF));      // the version 1 layout, heads apart
    std::vector<nvinfer1::PluginTensorDesc> swapped{q, q, v, z, S, mask};
    CHECK(plugin->onShapeChange(swapped.data(), 6, out.data(), 3) != 0);
    // The same node time-major: q, k, v (L, B, H*.), mask_pad (L, B).
    auto timeMajor = makeAttention(H, 1e-6F, 1);
    auto const qt = desc({L, B, H * E}, DataType::kHALF);
    auto const vt = desc({L, B, H * M}, DataType::kHALF);
    std::vector<nvinfer1::PluginTensorDesc> tm{qt, qt, vt, S, z, desc({L, B}, DataType::kUINT8)};
    std::vector<nvinfer1::PluginTensorDesc> tmOut{vt, S, z};
    CHECK_EQ(timeMajor->onShapeChange(tm.data(), 6, tmOut.data(), 3), 0);
    tm[5] = mask;
    CHECK(timeMajor->onShapeChange(tm.data(), 6, tmOut.data(), 3) != 0);
    CHECK(timeMajor->onShapeChange(good.data(), 6, out.data(), 3) != 0); // batch-first S0 / z0 batch is L here
    void const* inPtr[6]{};
    void* outPtr[3]{};
    auto fresh = makeAttention(H);
    CHECK(fresh->enqueue(good.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
}

TEST_CASE("getCreators without TensorRT in the process returns every creator")
{
    int32_t nb = 0;
    nvinfer1::IPluginCreatorInterface* const* creators = getCreators(nb);
    REQUIRE(nb == 4);
    REQUIRE(creators != nullptr);
    std::vector<std::string> names;
    for (int32_t i = 0; i < nb; ++i)
    {
        CHECK_EQ(std::string(creators[i]->getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
        auto* creator = static_cast<nvinfer1::IPluginCreatorV3One*>(creators[i]);
        names.emplace_back(creator->getPluginName());
        CHECK_EQ(std::string(creator->getPluginNamespace()), "rnnx");
    }
    CHECK((names
        == std::vector<std::string>{"SRUScan", "CausalLinearAttention", "LinearRecurrence", "CausalConvWithState"}));
}

TEST_CASE("LinearRecurrence enqueue passes sizes, rule, decay / beta layouts, scale, pointers and mask type")
{
    int32_t const B = 2, T = 5, Hkv = 2, dk = 16, dv = 8;
    struct Case
    {
        char const* rule;
        kernels::LinearRecurrenceRule expected;
        int32_t Hq;
        int64_t decayWidth; // Hkv per head, Hkv*dk per key dim
        int64_t betaWidth;  // Hkv or 1
    };
    for (Case const& c : {Case{"linear", kernels::LinearRecurrenceRule::kLINEAR, 2, Hkv, 1},
             Case{"gated", kernels::LinearRecurrenceRule::kGATED, 4, Hkv * dk, 1},
             Case{"gated", kernels::LinearRecurrenceRule::kGATED, 4, Hkv, 1},
             Case{"delta", kernels::LinearRecurrenceRule::kDELTA, 2, Hkv, Hkv},
             Case{"delta", kernels::LinearRecurrenceRule::kDELTA, 6, Hkv, 1},
             Case{"gated_delta", kernels::LinearRecurrenceRule::kGATED_DELTA, 4, Hkv * dk, Hkv},
             Case{"gated_delta", kernels::LinearRecurrenceRule::kGATED_DELTA, 2, Hkv, 1}})
    {
        for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
        {
            for (DataType maskType : {DataType::kINT32, DataType::kBOOL})
            {
                auto plugin = makeRecurrence(c.Hq, Hkv, c.rule, 0.25F);
                REQUIRE(plugin != nullptr);
                std::vector<nvinfer1::PluginTensorDesc> in{desc({B, T, c.Hq * dk}, type), desc({B, T, Hkv * dk}, type),
                    desc({B, T, Hkv * dv}, type), desc({B, Hkv, dk, dv}, DataType::kFLOAT),
                    desc({B, T, c.decayWidth}, type), desc({B, T, c.betaWidth}, type), desc({B, T}, maskType)};
                std::vector<nvinfer1::PluginTensorDesc> out{
                    desc({B, T, c.Hq * dv}, type), desc({B, Hkv, dk, dv}, DataType::kFLOAT)};
                REQUIRE(plugin->onShapeChange(in.data(), 7, out.data(), 2) == 0);
                std::vector<void const*> inPtr;
                for (int32_t i = 0; i < 7; ++i)
                {
                    inPtr.push_back(address(i));
                }
                void* outPtr[2] = {address(10), address(11)};
                REQUIRE(plugin->enqueue(in.data(), out.data(), inPtr.data(), outPtr, nullptr, kStream) == 0);
                LinearRecurrenceCall const& call = kernelsDouble().recurrence;
                bool const gated = c.expected == kernels::LinearRecurrenceRule::kGATED
                    || c.expected == kernels::LinearRecurrenceRule::kGATED_DELTA;
                bool const delta = c.expected == kernels::LinearRecurrenceRule::kDELTA
                    || c.expected == kernels::LinearRecurrenceRule::kGATED_DELTA;
                CHECK_EQ(call.count, 1);
                CHECK(call.params.batch == B && call.params.length == T && call.params.q_heads == c.Hq);
                CHECK(call.params.kv_heads == Hkv && call.params.dim_k == dk && call.params.dim_v == dv);
                CHECK(call.params.rule == c.expected);
                CHECK(call.params.scale == 0.25F);
                CHECK(call.params.kernel == kernels::LinearRecurrenceKernel::kAUTO);
                CHECK_EQ(call.params.decay_per_key, gated && c.decayWidth == Hkv * dk);
                CHECK_EQ(call.params.beta_per_head, delta && c.betaWidth == Hkv);
                kernels::DataType expectedType{};
                REQUIRE(plugin::toKernelType(type, expectedType));
                CHECK(call.type == expectedType);
                CHECK(call.query == inPtr[0] && call.key == inPtr[1] && call.value == inPtr[2]);
                CHECK(static_cast<void const*>(call.pastState) == inPtr[3]);
                // decay / beta only when the rule reads them: the exporter's dummies are never passed.
                CHECK(call.decay == (gated ? inPtr[4] : nullptr));
                CHECK(call.beta == (delta ? inPtr[5] : nullptr));
                CHECK(call.maskPad == inPtr[6]);
                CHECK(call.params.mask_type
                    == (maskType == DataType::kINT32 ? kernels::MaskType::kINT32 : kernels::MaskType::kUINT8));
                CHECK(call.output == outPtr[0]);
                CHECK(static_cast<void*>(call.presentState) == outPtr[1]);
                CHECK(call.stream == kStream);
                kernelsDouble() = KernelsDouble{};
            }
        }
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("LinearRecurrence onShapeChange refuses shapes that do not fit, naming tensor, got and expected")
{
    auto plugin = makeRecurrence(4, 2, "gated_delta");
    auto const f = DataType::kFLOAT;
    std::vector<nvinfer1::PluginTensorDesc> const good{desc({2, 5, 64}, f), desc({2, 5, 32}, f), desc({2, 5, 16}, f),
        desc({2, 2, 16, 8}, f), desc({2, 5, 2}, f), desc({2, 5, 1}, f), desc({2, 5}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 5, 32}, f), desc({2, 2, 16, 8}, f)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 7, out.data(), 2), 0);
    // T = 0 and B = 0 are valid shapes.
    std::vector<nvinfer1::PluginTensorDesc> empty{desc({2, 0, 64}, f), desc({2, 0, 32}, f), desc({2, 0, 16}, f),
        desc({2, 2, 16, 8}, f), desc({2, 0, 2}, f), desc({2, 0, 1}, f), desc({2, 0}, DataType::kINT32)};
    CHECK_EQ(plugin->onShapeChange(empty.data(), 7, out.data(), 2), 0);
    CHECK_EQ(takeLoggedErrors(), 0);
    struct Bad
    {
        int32_t input;
        nvinfer1::PluginTensorDesc d;
        char const* message;
    };
    for (Bad const& x : {Bad{0, desc({2, 5, 62}, f), "query (input 0) is (2, 5, 62)"},
             Bad{1, desc({2, 4, 32}, f), "key (input 1) is (2, 4, 32), expected (B, T, 2*d_k = 32)"},
             Bad{1, desc({2, 5, 64}, f), "key (input 1)"}, Bad{2, desc({3, 5, 16}, f), "value (input 2) is (3, 5, 16)"},
             Bad{3, desc({2, 2, 16, 4}, f), "past_state (input 3) is (2, 2, 16, 4), expected (B, 2, 16, 8)"},
             Bad{3, desc({1, 2, 16, 8}, f), "past_state (input 3)"}, Bad{4, desc({2, 5, 8}, f), "decay (input 4)"},
             Bad{5, desc({2, 5, 4}, f), "beta (input 5)"},
             Bad{6, desc({5, 2}, DataType::kINT32), "mask_pad (input 6) is (5, 2)"}})
    {
        auto in = good;
        in[static_cast<size_t>(x.input)] = x.d;
        takeLoggedMessages();
        CHECK(plugin->onShapeChange(in.data(), 7, out.data(), 2) != 0);
        std::string const logged = takeLoggedMessages();
        RNNX_CHECK_OR(logged.find(x.message) != std::string::npos, logged.c_str(), );
        CHECK(logged.find("LinearRecurrence 'layer': ") != std::string::npos);
    }
    // Head dims above 256.
    std::vector<nvinfer1::PluginTensorDesc> wide{desc({1, 1, 4 * 320}, f), desc({1, 1, 2 * 320}, f),
        desc({1, 1, 16}, f), desc({1, 2, 320, 8}, f), desc({1, 1, 2}, f), desc({1, 1, 1}, f),
        desc({1, 1}, DataType::kINT32)};
    takeLoggedMessages();
    CHECK(plugin->onShapeChange(wide.data(), 7, out.data(), 2) != 0);
    CHECK(takeLoggedMessages().find("head dim d_k = 320 exceeds 256") != std::string::npos);
    // 256 itself is taken.
    wide = {desc({1, 1, 4 * 256}, f), desc({1, 1, 2 * 256}, f), desc({1, 1, 2 * 256}, f), desc({1, 2, 256, 256}, f),
        desc({1, 1, 2 * 256}, f), desc({1, 1, 1}, f), desc({1, 1}, DataType::kINT32)};
    CHECK_EQ(plugin->onShapeChange(wide.data(), 7, out.data(), 2), 0);
    // A rule without decay / beta takes dummies of any shape.
    auto linear = makeRecurrence(4, 2, "linear");
    auto dummies = good;
    dummies[4] = desc({1}, f);
    dummies[5] = desc({}, f);
    CHECK_EQ(linear->onShapeChange(dummies.data(), 7, out.data(), 2), 0);
    CHECK(plugin->onShapeChange(dummies.data(), 7, out.data(), 2) != 0);
    takeLoggedErrors();
}

TEST_CASE("LinearRecurrence and CausalConvWithState enqueue report kernel errors and an unconfigured plugin")
{
    auto const f = DataType::kFLOAT;
    std::vector<nvinfer1::PluginTensorDesc> const in{desc({1, 2, 8}, f), desc({1, 2, 8}, f), desc({1, 2, 8}, f),
        desc({1, 1, 8, 8}, f), desc({1, 2, 1}, f), desc({1, 2, 1}, f), desc({1, 2}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> out{desc({1, 2, 8}, f), desc({1, 1, 8, 8}, f)};
    void const* inPtr[7] = {address(0), address(1), address(2), address(3), address(4), address(5), address(6)};
    void* outPtr[2] = {address(10), address(11)};
    auto fresh = makeRecurrence(1, 1);
    takeLoggedMessages();
    CHECK(fresh->enqueue(in.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("enqueue before a valid onShapeChange") != std::string::npos);
    REQUIRE(fresh->onShapeChange(in.data(), 7, out.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    CHECK(fresh->enqueue(in.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("kernel launch failed") != std::string::npos);
    kernelsDouble().status = cudaSuccess;
    // A mask type the kernels do not read (TensorRT never gives one: supportsFormatCombination takes int32 only).
    auto wrongMask = in;
    wrongMask[6] = desc({1, 2}, DataType::kHALF);
    CHECK(fresh->enqueue(wrongMask.data(), out.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("mask_pad (input 6) must be int32") != std::string::npos);
    auto conv = makeConv();
    std::vector<nvinfer1::PluginTensorDesc> const convIn{
        desc({1, 2, 3}, f), desc({2, 1, 3}, f), desc({2}, f), desc({1, 2, 2}, f), desc({1, 3}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> convOut{desc({1, 2, 3}, f), desc({1, 2, 2}, f)};
    CHECK(conv->enqueue(convIn.data(), convOut.data(), inPtr, outPtr, nullptr, kStream) != 0);
    REQUIRE(conv->onShapeChange(convIn.data(), 5, convOut.data(), 2) == 0);
    kernelsDouble().status = cudaErrorInvalidValue;
    CHECK(conv->enqueue(convIn.data(), convOut.data(), inPtr, outPtr, nullptr, kStream) != 0);
    CHECK(takeLoggedMessages().find("CausalConvWithState 'layer': kernel launch failed") != std::string::npos);
    takeLoggedErrors();
}

TEST_CASE("CausalConvWithState enqueue passes sizes, K, activation, pointers and mask type")
{
    int32_t const B = 3, C = 5, T = 7;
    for (int32_t K : {1, 4})
    {
        for (char const* activation : {"none", "silu", "swish"})
        {
            for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
            {
                auto plugin = makeConv(activation);
                std::vector<nvinfer1::PluginTensorDesc> in{desc({B, C, T}, type), desc({C, 1, K}, type),
                    desc({C}, type), desc({B, C, K - 1}, DataType::kFLOAT), desc({B, T}, DataType::kINT32)};
                std::vector<nvinfer1::PluginTensorDesc> out{
                    desc({B, C, T}, type), desc({B, C, K - 1}, DataType::kFLOAT)};
                REQUIRE(plugin->onShapeChange(in.data(), 5, out.data(), 2) == 0);
                void const* inPtr[5] = {address(0), address(1), address(2), address(3), address(4)};
                void* outPtr[2] = {address(10), address(11)};
                REQUIRE(plugin->enqueue(in.data(), out.data(), inPtr, outPtr, nullptr, kStream) == 0);
                CausalConvCall const& call = kernelsDouble().conv;
                CHECK_EQ(call.count, 1);
                CHECK(call.params.batch == B && call.params.channels == C && call.params.length == T);
                CHECK_EQ(call.params.kernel_size, K);
                CHECK_EQ(call.params.silu, std::string(activation) != "none");
                CHECK(call.params.mask_type == kernels::MaskType::kINT32);
                kernels::DataType expectedType{};
                REQUIRE(plugin::toKernelType(type, expectedType));
                CHECK(call.type == expectedType);
                CHECK(call.input == inPtr[0] && call.weight == inPtr[1] && call.bias == inPtr[2]);
                CHECK(static_cast<void const*>(call.pastState) == inPtr[3] && call.maskPad == inPtr[4]);
                CHECK(call.output == outPtr[0] && static_cast<void*>(call.presentState) == outPtr[1]);
                CHECK(call.stream == kStream);
                kernelsDouble() = KernelsDouble{};
            }
        }
    }
    CHECK_EQ(takeLoggedErrors(), 0);
}

TEST_CASE("CausalConvWithState onShapeChange refuses shapes that do not fit, naming tensor, got and expected")
{
    auto plugin = makeConv("silu");
    auto const h = DataType::kHALF;
    std::vector<nvinfer1::PluginTensorDesc> const good{desc({2, 4, 6}, h), desc({4, 1, 3}, h), desc({4}, h),
        desc({2, 4, 2}, DataType::kFLOAT), desc({2, 6}, DataType::kINT32)};
    std::vector<nvinfer1::PluginTensorDesc> out{desc({2, 4, 6}, h), desc({2, 4, 2}, DataType::kFLOAT)};
    CHECK_EQ(plugin->onShapeChange(good.data(), 5, out.data(), 2), 0);
    CHECK_EQ(takeLoggedErrors(), 0);
    struct Bad
    {
        int32_t input;
        nvinfer1::PluginTensorDesc d;
        char const* message;
    };
    for (Bad const& x : {Bad{0, desc({2, 4}, h), "input (input 0) is (2, 4), expected (B, C, T)"},
             Bad{1, desc({3, 1, 3}, h), "weight (input 1) is (3, 1, 3), expected (C, 1, K)"},
             Bad{1, desc({4, 1, 0}, h), "weight (input 1)"}, Bad{2, desc({5}, h), "bias (input 2) is (5)"},
             Bad{3, desc({2, 4, 3}, DataType::kFLOAT), "past_state (input 3) is (2, 4, 3), expected (B, C, K-1)"},
             Bad{4, desc({6, 2}, DataType::kINT32), "mask_pad (input 4) is (6, 2), expected (B, T)"}})
    {
        auto in = good;
        in[static_cast<size_t>(x.input)] = x.d;
        takeLoggedMessages();
        CHECK(plugin->onShapeChange(in.data(), 5, out.data(), 2) != 0);
        std::string const logged = takeLoggedMessages();
        RNNX_CHECK_OR(logged.find(x.message) != std::string::npos, logged.c_str(), );
        CHECK(logged.find("CausalConvWithState 'layer': ") != std::string::npos);
    }
    takeLoggedErrors();
}
