// safetensors files (8-byte little-endian header size, a JSON header, the tensors' bytes): the state file
// format that the Python runtime writes and reads too (rnnx/runtime/state.py).
#pragma once

#include "tensor.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace rnnx
{

struct SafetensorsFile
{
    std::map<std::string, std::string> metadata; // the header's __metadata__ (string values)
    std::vector<std::pair<std::string, HostTensor>> tensors;
};

// Writes `file` to `path` atomically (a temporary file beside it, then rename). Throws Error (IO).
void write_safetensors(const std::string& path, const SafetensorsFile& file);

// Reads a safetensors file; Error (STATE_FILE) naming the path for a truncated or malformed one.
SafetensorsFile read_safetensors(const std::string& path);

} // namespace rnnx
