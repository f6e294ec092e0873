/*
 * rnnx_plugin_tests: runs every TEST_CASE and prints "N passed, N failed".
 * `rnnx_plugin_tests --fields` prints, as JSON, per plugin: the creator's field table, and what a plugin
 * instance (made as the test cases make it) answers about its tensors: the input counts it accepts, its number
 * of outputs, the role of every input and output (probed through supportsFormatCombination), its output types
 * for fp16 activations, and the name and version of its build capability ("PLUGIN_V3ONE_BUILD 1.0":
 * IPluginV3OneBuild, which has no getAliasedInput, so no output ever aliases an input).
 * tests/test_plugins.py compares all of it with the op records of runtime/contract/ops.py, the single source of the
 * op contract. The plugins are those the library registers (registeredCreators), each made and described by its
 * op's test probe (RNNX_PLUGIN_TEST_PROBE in plugins/<op>/tests/).
 */
#include "common/pluginRegistry.h"
#include "kernelsDouble.h"
#include "testHarness.h"
#include "testUtils.h"

#include <cstring>
#include <string>
#include <vector>

namespace rnnx
{
namespace test
{
namespace
{

void discardingSink(nvinfer1::ILogger::Severity, char const*) {}

using nvinfer1::DataType;
using IoDescs = std::vector<nvinfer1::DynamicPluginTensorDesc>;

//! The role supportsFormatCombination allows at `pos` while the first input is fp16: "mask" (takes int32),
//! "activation" (takes fp16) or "state" (takes fp32 only).
std::string probeRole(nvinfer1::IPluginV3OneBuild& build, int32_t pos, int32_t nbInputs, int32_t nbOutputs)
{
    IoDescs io(static_cast<size_t>(nbInputs + nbOutputs), dynDesc(desc({1}, DataType::kHALF)));
    auto const accepts = [&](DataType type)
    {
        io[static_cast<size_t>(pos)] = dynDesc(desc({1}, type));
        return build.supportsFormatCombination(pos, io.data(), nbInputs, nbOutputs);
    };
    if (accepts(DataType::kINT32))
    {
        return "mask";
    }
    if (accepts(DataType::kHALF))
    {
        return "activation";
    }
    return accepts(DataType::kFLOAT) ? "state" : "none";
}

char const* typeName(DataType type)
{
    switch (type)
    {
    case DataType::kFLOAT: return "float";
    case DataType::kHALF: return "half";
    case DataType::kBF16: return "bf16";
    case DataType::kBOOL: return "bool";
    default: return "other";
    }
}

template <typename T> std::string jsonList(std::vector<T> const& values, bool quoted)
{
    std::string out = "[";
    for (size_t i = 0; i < values.size(); ++i)
    {
        std::ostringstream item;
        item << values[i];
        out += (i > 0 ? ", " : "") + (quoted ? "\"" + item.str() + "\"" : item.str());
    }
    return out + "]";
}

//! The tensor facts of `plugin` as JSON members (no braces); `plugin` is configured with all inputs on the way.
std::string pluginFacts(nvinfer1::IPluginV3& plugin)
{
    auto& build = *static_cast<nvinfer1::IPluginV3OneBuild*>(
        plugin.getCapabilityInterface(nvinfer1::PluginCapabilityType::kBUILD));
    int32_t const nbOutputs = build.getNbOutputs();
    IoDescs out(static_cast<size_t>(nbOutputs), dynDesc(desc({1}, DataType::kFLOAT)));
    std::vector<int32_t> counts;
    for (int32_t n = 0; n <= 8; ++n)
    {
        // Each plugin accepts exactly one count: its fixed TensorRT node layout.
        IoDescs in(static_cast<size_t>(n), dynDesc(desc({1, 1, 1, 1}, DataType::kFLOAT)));
        if (build.configurePlugin(in.data(), n, out.data(), nbOutputs) == 0)
        {
            counts.push_back(n);
        }
    }
    int32_t const nbInputs = counts.empty() ? 0 : counts.back();
    IoDescs in(static_cast<size_t>(nbInputs), dynDesc(desc({1, 1, 1, 1}, DataType::kFLOAT)));
    build.configurePlugin(in.data(), nbInputs, out.data(), nbOutputs);
    std::vector<std::string> inputRoles;
    std::vector<std::string> outputRoles;
    std::vector<DataType> inputTypes;
    for (int32_t pos = 0; pos < nbInputs + nbOutputs; ++pos)
    {
        std::string const role = probeRole(build, pos, nbInputs, nbOutputs);
        (pos < nbInputs ? inputRoles : outputRoles).push_back(role);
        if (pos < nbInputs)
        {
            inputTypes.push_back(
                role == "mask" ? DataType::kINT32 : (role == "state" ? DataType::kFLOAT : DataType::kHALF));
        }
    }
    std::vector<DataType> types(static_cast<size_t>(nbOutputs), DataType::kINT32);
    std::vector<std::string> outputTypes;
    bool const typed = build.getOutputDataTypes(types.data(), nbOutputs, inputTypes.data(), nbInputs) == 0;
    for (int32_t o = 0; o < nbOutputs; ++o)
    {
        outputTypes.emplace_back(typed ? typeName(types[static_cast<size_t>(o)]) : "error");
    }
    // TensorRT tells the build capability's version from this: major 1 (IPluginV3OneBuild) declares no aliasing,
    // major 2 (IPluginV3OneBuildV2) would be asked getAliasedInput.
    nvinfer1::InterfaceInfo const info = build.getInterfaceInfo();
    std::string const buildInterface =
        std::string(info.kind) + " " + std::to_string(info.major) + "." + std::to_string(info.minor);
    return "\"inputCounts\": " + jsonList(counts, false) + ", \"nbOutputs\": " + std::to_string(nbOutputs)
        + ", \"inputRoles\": " + jsonList(inputRoles, true) + ", \"outputRoles\": " + jsonList(outputRoles, true)
        + ", \"outputTypes\": " + jsonList(outputTypes, true) + ", \"buildInterface\": \"" + buildInterface + "\"";
}

void printFields(char const* name, nvinfer1::IPluginCreatorV3One& creator, std::vector<plugin::FieldDesc> const& table,
    nvinfer1::IPluginV3& plugin, bool last)
{
    nvinfer1::PluginFieldCollection const* fc = creator.getFieldNames();
    std::cout << "  \"" << name << "\": {\"name\": \"" << creator.getPluginName() << "\", \"version\": \""
              << creator.getPluginVersion() << "\", \"namespace\": \"" << creator.getPluginNamespace()
              << "\", \"fields\": [";
    for (int32_t i = 0; i < fc->nbFields; ++i)
    {
        nvinfer1::PluginField const& f = fc->fields[i];
        // The kind as the records spell it (OpAttribute.kind), from the type the creator reports.
        char const* const kind = f.type == nvinfer1::PluginFieldType::kINT32
            ? "int"
            : (f.type == nvinfer1::PluginFieldType::kCHAR ? "str" : "float");
        std::cout << (i > 0 ? ", " : "") << "{\"name\": \"" << f.name << "\", \"kind\": \"" << kind
                  << "\", \"default\": ";
        std::cout.precision(17);
        if (table[i].kind == plugin::FieldKind::kSTRING)
        {
            std::cout << "\"" << table[i].choices[static_cast<size_t>(table[i].defaultValue)] << "\"";
        }
        else
        {
            std::cout << table[i].defaultValue;
        }
        std::cout << ", \"required\": " << (table[i].required ? "true" : "false") << "}";
    }
    std::cout << "], " << pluginFacts(plugin) << "}" << (last ? "" : ",") << "\n";
}

} // namespace

} // namespace test
} // namespace rnnx

int main(int argc, char** argv)
{
    using namespace rnnx;
    if (argc > 1 && std::strcmp(argv[1], "--fields") == 0)
    {
        plugin::setLogSink(&test::discardingSink); // probing configurePlugin with every input count logs errors
        std::vector<nvinfer1::IPluginCreatorInterface*> const& creators = plugin::registeredCreators();
        std::cout << "{\n";
        for (size_t i = 0; i < creators.size(); ++i)
        {
            auto& creator = *static_cast<nvinfer1::IPluginCreatorV3One*>(creators[i]);
            test::PluginTestProbe const* probe = test::findPluginTestProbe(creator.getPluginName());
            if (probe == nullptr)
            {
                std::cerr << "no test probe for the plugin " << creator.getPluginName()
                          << ": register one with RNNX_PLUGIN_TEST_PROBE in its op's tests\n";
                return 1;
            }
            auto const instance = probe->make();
            test::printFields(
                creator.getPluginName(), creator, probe->fieldTable(), *instance, i + 1 == creators.size());
        }
        std::cout << "}\n";
        return 0;
    }
    char const* filter = argc > 1 ? argv[1] : nullptr;
    plugin::setLogSink(&test::errorCountingLogSink<false>);
    auto const resetKernels = [](test::TestCase const&) { test::resetKernelsDouble(); };
    return test::runTestCases(filter, resetKernels, /*failOnLoggedErrors=*/false);
}
