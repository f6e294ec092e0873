#include "tensor.h"

#include "error.h"

#include <map>

namespace rnnx
{
namespace
{

struct DtypeInfo
{
    size_t size;
    const char* code;
};

const std::map<std::string, DtypeInfo>& dtypes()
{
    static const std::map<std::string, DtypeInfo> table = {{"float32", {4, "F32"}}, {"float16", {2, "F16"}},
        {"bfloat16", {2, "BF16"}}, {"float64", {8, "F64"}}, {"int64", {8, "I64"}}, {"int32", {4, "I32"}},
        {"int8", {1, "I8"}}, {"uint8", {1, "U8"}}, {"bool", {1, "BOOL"}}};
    return table;
}

} // namespace

size_t itemsize(const std::string& dtype)
{
    const auto it = dtypes().find(dtype);
    if (it == dtypes().end())
        throw Error(RNNX_ERROR_METADATA, "unsupported dtype '" + dtype + "'");
    return it->second.size;
}

int64_t numel(const std::vector<int64_t>& shape)
{
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    return n;
}

int64_t checked_bytes(const std::vector<int64_t>& shape, const std::string& dtype)
{
    int64_t n = static_cast<int64_t>(itemsize(dtype));
    for (int64_t d : shape)
        if (d < 0 || __builtin_mul_overflow(n, d, &n))
            return -1;
    return n;
}

std::string shape_text(const std::vector<int64_t>& shape)
{
    std::string out = "(";
    for (size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + (shape.size() == 1 ? ",)" : ")");
}

std::string safetensors_code(const std::string& dtype)
{
    const auto it = dtypes().find(dtype);
    if (it == dtypes().end())
        throw Error(RNNX_ERROR_INVALID_ARGUMENT, "dtype '" + dtype + "' has no safetensors code");
    return it->second.code;
}

std::string dtype_of_safetensors_code(const std::string& code)
{
    for (const auto& entry : dtypes())
        if (code == entry.second.code)
            return entry.first;
    throw Error(RNNX_ERROR_STATE_FILE, "unsupported safetensors dtype '" + code + "'");
}

} // namespace rnnx
