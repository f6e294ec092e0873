/*
 * The TensorRT major a build serves: the soname the library looks for TensorRT in (RTLD_NOLOAD), the marker string
 * that records the headers' version in the binary, and the exported functions returning it. All follow
 * NV_TENSORRT_MAJOR / MINOR / PATCH of the headers compiled against (10.x and 11.x alike).
 */
#include "common/pluginCommon.h"
#include "testHarness.h"

#include <dlfcn.h>

#include <cstring>
#include <string>

extern "C" int32_t rnnx_trt_plugins_tensorrt_major();
extern "C" char const* rnnx_trt_plugins_tensorrt_version();

using namespace rnnx;

namespace
{

std::string headersVersion()
{
    return std::to_string(NV_TENSORRT_MAJOR) + "." + std::to_string(NV_TENSORRT_MINOR) + "."
        + std::to_string(NV_TENSORRT_PATCH);
}

} // namespace

TEST_CASE("the TensorRT soname looked up is that of the headers' major")
{
    CHECK_EQ(std::string(plugin::kTENSORRT_SONAME), "libnvinfer.so." + std::to_string(NV_TENSORRT_MAJOR));
}

TEST_CASE("the headers marker is the prefix, then the headers' major.minor.patch, NUL-terminated")
{
    std::string const marker(plugin::kTENSORRT_HEADERS_MARKER);
    CHECK_EQ(marker, "rnnx-trt-plugins:tensorrt-headers=" + headersVersion());
    CHECK_EQ(marker.size() + 1, sizeof(plugin::kTENSORRT_HEADERS_MARKER));
    CHECK_EQ(plugin::kTENSORRT_HEADERS_MARKER_PREFIX_LENGTH, std::strlen("rnnx-trt-plugins:tensorrt-headers="));
}

TEST_CASE("the exported version functions return the headers' major and version")
{
    CHECK_EQ(rnnx_trt_plugins_tensorrt_major(), NV_TENSORRT_MAJOR);
    CHECK_EQ(std::string(rnnx_trt_plugins_tensorrt_version()), headersVersion());
}

TEST_CASE("no TensorRT library in the process: TensorRT symbols are not found and nothing is loaded")
{
    // The unit tests run without TensorRT (no libnvinfer is loaded, and RTLD_NOLOAD loads none).
    CHECK(plugin::findLoadedTensorRtSymbol("getPluginRegistry") == nullptr);
    CHECK(plugin::findLoadedTensorRtSymbol("getLogger") == nullptr);
    CHECK(dlopen(plugin::kTENSORRT_SONAME, RTLD_LAZY | RTLD_NOLOAD) == nullptr);
}

TEST_CASE("getInferLibVersion values decode to their TensorRT major, in both encodings")
{
    // (major * 100 + minor) * 100 + patch from TensorRT 10 on.
    CHECK_EQ(plugin::decodeInferLibMajor(101401), 10); // 10.14.1
    CHECK_EQ(plugin::decodeInferLibMajor(100000), 10); // 10.0.0
    CHECK_EQ(plugin::decodeInferLibMajor(110100), 11); // 11.1.0
    CHECK_EQ(plugin::decodeInferLibMajor(129999), 12); // 12.99.99
    // major * 1000 + minor * 100 + patch before.
    CHECK_EQ(plugin::decodeInferLibMajor(8601), 8); // 8.6.1
    CHECK_EQ(plugin::decodeInferLibMajor(9300), 9); // 9.3.0
    CHECK_EQ(plugin::decodeInferLibMajor(7103), 7); // 7.1.3
    CHECK_EQ(plugin::decodeInferLibMajor(-1), -1);
}

TEST_CASE("a TensorRT of the headers' major is used; another major, or none reported, is refused in one line")
{
    CHECK(plugin::tensorRtMajorMismatch("getPluginRegistry", NV_TENSORRT_MAJOR).empty());
    int32_t const other = NV_TENSORRT_MAJOR == 10 ? 11 : 10;
    std::string const line = plugin::tensorRtMajorMismatch("getPluginRegistry", other);
    std::string const headers = std::to_string(NV_TENSORRT_MAJOR);
    std::string const found = std::to_string(other);
    CHECK_EQ(line,
        "[rnnx plugins] getPluginRegistry not used: the TensorRT in this process is " + found
            + ", but this plugin library was built against TensorRT " + headers
            + " headers: build the plugins for TensorRT " + found + ": TENSORRT_ROOT=<TensorRT " + found
            + " dir> python -m rnnx.plugins --major " + found);
    CHECK(line.find('\n') == std::string::npos);
    CHECK_EQ(plugin::tensorRtMajorMismatch("getLogger", 8),
        "[rnnx plugins] getLogger not used: the TensorRT in this process is 8, but this plugin library was built "
        "against TensorRT "
            + headers + " headers: rnnx's plugins need TensorRT 10 or newer");
    std::string const none = plugin::tensorRtMajorMismatch("getLogger", -1);
    CHECK(none.find("getLogger not used: the TensorRT library that has it reports no version") != std::string::npos);
    CHECK(none.find("built against TensorRT " + headers + " headers") != std::string::npos);
}

TEST_CASE("no TensorRT in the global scope either: the registry lookup finds nothing")
{
    // This executable defines no getPluginRegistry (libraryTest.cpp's does, with a stand-in TensorRT version).
    CHECK(plugin::findLoadedTensorRtSymbol("getPluginRegistry", true) == nullptr);
}
