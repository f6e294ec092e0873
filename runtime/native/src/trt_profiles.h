// The optimization profiles the TensorRT backend expects of an engine: 0 = decode, 1 = prefill, as
// rnnx.runtime.tensorrt.profiles.build_profiles makes them (the backend selects 0 for a one-token call and 1
// for any other). A pure function over the profiles' ranges of the sequence axis, so it is tested without
// TensorRT (tools/rnnx_trt_plugins_test.cpp); trt_backend.cpp reads the ranges from the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rnnx
{

// One optimization profile's min / opt / max of the token input's sequence axis (input_ids' axis 1).
struct SequenceRange
{
    int64_t min = 0;
    int64_t opt = 0;
    int64_t max = 0;
};

// "" when the engine's profiles are in the backend's order, else what is wrong (one line, without the engine's
// file name, which the caller puts first). `tensor`: the token input's name (for the message); `ranges[i]`:
// profile i's range of its sequence axis. In order:
//  - at least 2 profiles;
//  - profile 0 holds decode: its sequence axis is 1 at min and at max;
//  - profile 1 holds prefill: its range starts at 1 or 2, so every prompt length from 2 to its max has a
//    profile (rnnx's prefill profile is 1..max_length; an engine built with max_length 1 has 1..1 there too).
std::string profile_order_problem(const std::string& tensor, const std::vector<SequenceRange>& ranges);

} // namespace rnnx
