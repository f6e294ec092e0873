// The one exception type inside the library: a status code and a one-line message. The C API turns it
// (and any other exception) into an rnnx_status and rnnx_last_error(); nothing crosses the C boundary.
#pragma once

#include "rnnx/rnnx.h"

#include <stdexcept>
#include <string>

namespace rnnx
{

class Error : public std::runtime_error
{
public:
    Error(rnnx_status status, const std::string& message)
        : std::runtime_error(message)
        , status_(status)
    {
    }
    rnnx_status status() const
    {
        return status_;
    }

private:
    rnnx_status status_;
};

} // namespace rnnx
