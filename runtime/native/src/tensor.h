// Host tensors and dtype names: numpy's spellings as rnnx.json writes them, and safetensors' codes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rnnx
{

// A host tensor: dtype (numpy spelling: "float32", "bool", ...), shape and its bytes (row-major).
struct HostTensor
{
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
};

// Bytes per element of a dtype; throws Error for one the runtime does not know.
size_t itemsize(const std::string& dtype);
// Product of the dims (1 for a scalar); the dims are trusted (from the runtime itself).
int64_t numel(const std::vector<int64_t>& shape);
// Bytes of a tensor of `shape` and `dtype` from an untrusted file: -1 when a dim is negative or the product
// overflows.
int64_t checked_bytes(const std::vector<int64_t>& shape, const std::string& dtype);
// "(2, 3, 4)".
std::string shape_text(const std::vector<int64_t>& shape);
// safetensors' dtype code ("F32") of a numpy dtype name, and back.
std::string safetensors_code(const std::string& dtype);
std::string dtype_of_safetensors_code(const std::string& code);

} // namespace rnnx
