/*
 * rnnx_plugin_tests: runs every TEST_CASE and prints "N passed, N failed".
 * `rnnx_plugin_tests --fields` prints the creators' field tables as JSON instead (tests/test_plugins.py
 * compares them with models/ops/spec.py, the single source of the op contract).
 */
#include "testHarness.h"
#include "kernelsDouble.h"
#include "testUtils.h"

#include <cstring>

namespace rnnx
{
namespace test
{
namespace
{

void countingSink(nvinfer1::ILogger::Severity severity, char const*)
{
    if (severity <= nvinfer1::ILogger::Severity::kERROR)
    {
        countLoggedError();
    }
}

void printFields(
    char const* name, nvinfer1::IPluginCreatorV3One& creator, std::vector<plugin::FieldDesc> const& table, bool last)
{
    nvinfer1::PluginFieldCollection const* fc = creator.getFieldNames();
    std::cout << "  \"" << name << "\": {\"name\": \"" << creator.getPluginName() << "\", \"version\": \""
              << creator.getPluginVersion() << "\", \"namespace\": \"" << creator.getPluginNamespace()
              << "\", \"fields\": [";
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& f = fc->fields[i];
        bool const isInt = f.type == nvinfer1::PluginFieldType::kINT32;
        std::cout << (i > 0 ? ", " : "") << "{\"name\": \"" << f.name << "\", \"kind\": \"" << (isInt ? "int" : "float")
                  << "\", \"default\": ";
        std::cout.precision(17);
        std::cout << table[i].defaultValue << ", \"required\": " << (table[i].required ? "true" : "false") << "}";
    }
    std::cout << "]}" << (last ? "" : ",") << "\n";
}

} // namespace

} // namespace test
} // namespace rnnx

int main(int argc, char** argv)
{
    using namespace rnnx;
    if (argc > 1 && std::strcmp(argv[1], "--fields") == 0)
    {
        plugin::SruScanPluginCreator sru;
        plugin::CausalLinearAttentionPluginCreator attention;
        std::cout << "{\n";
        test::printFields("SRUScan", sru, plugin::SruScanPlugin::fieldTable(), false);
        test::printFields("CausalLinearAttention", attention, plugin::CausalLinearAttentionPlugin::fieldTable(), true);
        std::cout << "}\n";
        return 0;
    }
    char const* filter = argc > 1 ? argv[1] : nullptr;
    plugin::setLogSink(&test::countingSink);
    auto const resetKernels = [](test::TestCase const&) { test::kernelsDouble() = test::KernelsDouble{}; };
    return test::runTestCases(filter, resetKernels, /*failOnLoggedErrors=*/false);
}
