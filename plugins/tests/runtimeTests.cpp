/*
 * Runtime behaviour, op-agnostic: getCreators (the load_library library's entry point) returns every registered
 * creator. Each op's onShapeChange / enqueue tests are in plugins/<op>/tests/<opCamel>RuntimeTests.cpp.
 */
#include "common/pluginRegistry.h"
#include "testHarness.h"
#include "testUtils.h"

#include <string>
#include <vector>

extern "C" nvinfer1::IPluginCreatorInterface* const* getCreators(int32_t& nbCreators);

using namespace rnnx;
using namespace rnnx::test;

TEST_CASE("getCreators without TensorRT in the process returns every creator")
{
    int32_t nb = 0;
    nvinfer1::IPluginCreatorInterface* const* creators = getCreators(nb);
    REQUIRE(nb > 0);
    REQUIRE(creators != nullptr);
    CHECK_EQ(static_cast<size_t>(nb), plugin::registeredCreators().size());
    std::vector<std::string> names;
    for (int32_t i = 0; i < nb; ++i)
    {
        CHECK_EQ(std::string(creators[i]->getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
        auto* creator = static_cast<nvinfer1::IPluginCreatorV3One*>(creators[i]);
        names.emplace_back(creator->getPluginName());
        CHECK_EQ(std::string(creator->getPluginNamespace()), "rnnx");
    }
    // Sorted by name, each once: the order does not depend on the link order of the op folders.
    for (size_t i = 1; i < names.size(); ++i)
    {
        CHECK(names[i - 1] < names[i]);
    }
    for (int32_t i = 0; i < nb; ++i)
    {
        CHECK(creators[i] == plugin::registeredCreators()[static_cast<size_t>(i)]);
    }
}
