// The one exception type inside the library: a status code, a one-line message and, for a refusal of the artifact
// contract (contract.h), its reason. The C API turns it (and any other exception) into an rnnx_status,
// rnnx_last_error() and rnnx_last_error_reason(); nothing crosses the C boundary.
#pragma once

#include "rnnx/rnnx.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace rnnx
{

class Error : public std::runtime_error
{
public:
    Error(rnnx_status status, const std::string& message, std::string reason = "")
        : std::runtime_error(message)
        , status_(status)
        , reason_(std::move(reason))
    {
    }
    rnnx_status status() const
    {
        return status_;
    }
    // The refusal's key in the contract's table (rnnx/runtime/contract/artifact.py's REFUSALS); "" for other errors.
    const std::string& reason() const
    {
        return reason_;
    }

private:
    rnnx_status status_;
    std::string reason_;
};

} // namespace rnnx
