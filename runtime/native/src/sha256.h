// SHA-256 (FIPS 180-4) of a file, as lowercase hex: the hashes rnnx.json records.
#pragma once

#include <string>

namespace rnnx
{

// Hex SHA-256 of the file at `path`; throws std::runtime_error when it cannot be read.
std::string sha256_file(const std::string& path);

// Hex SHA-256 of a byte string.
std::string sha256_bytes(const std::string& bytes);

} // namespace rnnx
