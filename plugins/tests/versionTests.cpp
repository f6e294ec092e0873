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
