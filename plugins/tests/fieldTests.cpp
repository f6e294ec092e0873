/*
 * Creators, op-agnostic: every creator the library registers (registeredCreators, common/pluginRegistry.h) reports
 * version 2, namespace rnnx and the V3One interface, and has a test probe. Each op's field tests (names, field lists,
 * createPlugin with every accepted field type, errors for bad fields, the round trip) are in
 * plugins/<op>/tests/<opCamel>FieldTests.cpp.
 */
#include "common/pluginRegistry.h"
#include "testHarness.h"
#include "testUtils.h"

#include <cstring>
#include <string>

using namespace rnnx;
using namespace rnnx::test;

TEST_CASE("creators report the ONNX op names, version 2 and namespace rnnx")
{
    std::vector<nvinfer1::IPluginCreatorInterface*> const& creators = plugin::registeredCreators();
    REQUIRE(!creators.empty());
    std::string previous;
    for (nvinfer1::IPluginCreatorInterface* creator : creators)
    {
        REQUIRE(creator != nullptr);
        CHECK_EQ(std::string(creator->getInterfaceInfo().kind), "PLUGIN CREATOR_V3ONE");
        auto* c = static_cast<nvinfer1::IPluginCreatorV3One*>(creator);
        std::string const name = c->getPluginName();
        CHECK_EQ(std::string(c->getPluginVersion()), "2");
        CHECK_EQ(std::string(c->getPluginNamespace()), "rnnx");
        // Sorted by name, each once; each op's tests register a probe of its plugin (RNNX_PLUGIN_TEST_PROBE).
        CHECK(previous < name);
        CHECK(findPluginTestProbe(name.c_str()) != nullptr);
        previous = name;
    }
    CHECK_EQ(pluginTestProbes().size(), creators.size());
}
