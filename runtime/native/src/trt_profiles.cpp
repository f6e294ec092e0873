#include "trt_profiles.h"

namespace rnnx
{
namespace
{

// "lengths 1..512 (opt 512)" or "length 1".
std::string describe(const SequenceRange& r)
{
    if (r.min == r.max)
        return "length " + std::to_string(r.min);
    return "lengths " + std::to_string(r.min) + ".." + std::to_string(r.max) + " (opt " + std::to_string(r.opt) + ")";
}

} // namespace

std::string profile_order_problem(const std::string& tensor, const std::vector<SequenceRange>& ranges)
{
    const bool ordered = ranges.size() >= 2 && ranges[0].min == 1 && ranges[0].max == 1 && ranges[1].min >= 1
        && ranges[1].min <= 2 && ranges[1].max >= ranges[1].min;
    if (ordered)
        return "";
    std::string held;
    for (size_t i = 0; i < ranges.size(); ++i)
        held +=
            (i == 0 ? "" : ", ") + ("profile " + std::to_string(i) + " holds " + tensor + " ") + describe(ranges[i]);
    if (ranges.size() < 2)
        held = "it has " + std::to_string(ranges.size()) + " optimization profile" + (ranges.size() == 1 ? "" : "s")
            + (held.empty() ? "" : " (" + held + ")");
    return held
        + "; the tensorrt backend needs profile 0 = decode (length 1) and profile 1 = prefill (lengths 1..max), "
          "the order rnnx.runtime.tensorrt.build_engine builds";
}

} // namespace rnnx
