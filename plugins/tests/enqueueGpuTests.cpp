/*
 * plugin_enqueue_gpu: the plugins' enqueue on a real CUDA device against a plain C++ reference. This file has the
 * runner (main); the helpers are in enqueueTestUtils.h and each op's cases in
 * plugins/<op>/tests/<opCamel>EnqueueTests.cpp.
 *
 * Each case walks a plugin through the calls TensorRT makes: createPlugin (kBUILD) with the fields the ONNX
 * parser passes (INT -> kINT32, FLOAT -> kFLOAT32, plugin_version / plugin_namespace as kCHAR),
 * getOutputDataTypes, supportsFormatCombination, configurePlugin, getWorkspaceSize,
 * getFieldsToSerialize -> createPlugin (kRUNTIME) -> attachToContext, then onShapeChange + enqueue on a
 * cudaStream_t with cudaMalloc'ed buffers. The outputs are compared with naive loops of docs/ops.md written
 * in each op's file (fp64 accumulation, from the same rounded inputs), for random shapes, fp32 / fp16 / bf16
 * activations, mask_pad (int32, what TensorRT hands the plugins; also bool and uint8 bound by hand, equal to int32),
 * state the model did not give (zeros), and prefill-then-step with the state fed back through two buffers (ping-pong,
 * as the runtime binds it: the plugins declare no aliasing, so a call never writes the state buffer it reads, which is
 * checked). Every call uses the TensorRT node layout the exporter emits (each op's file says which). The kernels'
 * in-place mode is tested on the kernels directly (tests/test_cuda_kernels*.py).
 *
 * Without a CUDA device (cudaGetDeviceCount fails or finds none) it prints a "SKIP ... no CUDA device" line
 * and exits with 77, ctest's SKIP_RETURN_CODE for this test. Otherwise it prints "N passed, N failed".
 * Arguments: [--dtype fp32|fp16|bf16[,...]] [FILTER]. --dtype limits the activation types (default all three):
 * the cases that loop over types run only those, a case written for one other type runs nothing, and the node
 * layout cases spread their configurations over the selected types (scripts/gpu_check.sh runs each type under
 * compute-sanitizer on its own). FILTER is a substring selecting test cases. RNNX_TEST_SEED sets the random seed.
 */
#include "enqueueTestUtils.h"
#include "testHarness.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

using namespace rnnx;
using namespace rnnx::test;

int main(int argc, char** argv)
{
    char const* filter = nullptr;
    for (int i = 1; i < argc; ++i)
    {
        std::string const arg = argv[i];
        if (arg == "--dtype" || arg.rfind("--dtype=", 0) == 0)
        {
            bool const inlineValue = arg.size() > 7;
            if (!inlineValue && i + 1 >= argc)
            {
                std::cout << "--dtype needs a value: fp32, fp16, bf16 or a comma-separated list\n";
                return 2;
            }
            if (!selectActs(inlineValue ? arg.substr(8) : std::string(argv[++i])))
            {
                return 2;
            }
        }
        else if (filter == nullptr && arg.rfind("--", 0) != 0)
        {
            filter = argv[i];
        }
        else
        {
            std::cout << "usage: plugin_enqueue_gpu [--dtype fp32|fp16|bf16[,...]] [FILTER]\n";
            return 2;
        }
    }
    int deviceCount = 0;
    cudaError_t const status = cudaGetDeviceCount(&deviceCount);
    if (status != cudaSuccess || deviceCount == 0)
    {
        std::cout << "SKIP plugin_enqueue_gpu: no CUDA device ("
                  << (status != cudaSuccess ? std::string("cudaGetDeviceCount: ") + cudaGetErrorName(status) + ": "
                                 + cudaGetErrorString(status)
                                            : std::string("cudaGetDeviceCount found 0 devices"))
                  << ")\n";
        return 77;
    }
    cudaDeviceProp prop{};
    if (cudaSetDevice(0) != cudaSuccess || cudaGetDeviceProperties(&prop, 0) != cudaSuccess)
    {
        std::cout << "cannot use CUDA device 0\n";
        return 1;
    }
    uint64_t seed = 20240611;
    if (char const* env = std::getenv("RNNX_TEST_SEED"))
    {
        seed = std::strtoull(env, nullptr, 10);
    }
    std::cout << "device 0: " << prop.name << " (sm_" << prop.major << prop.minor << "), seed " << seed << "\n";
    std::cout << "activation types:";
    for (Act a : selectedActs())
    {
        std::cout << " " << name(a);
    }
    std::cout << (selectedActs().size() < 3 ? " (a case written for another type runs nothing)\n" : "\n");

    plugin::setLogSink(&test::errorCountingLogSink<true>);
    // Each case draws from its own stream of the seed, so a filter reproduces the full run's data.
    auto const seedCase = [seed](test::TestCase const& testCase)
    { rng().seed(seed + std::hash<std::string>{}(testCase.name)); };
    return test::runTestCases(filter, seedCase, /*failOnLoggedErrors=*/true);
}
