// The torch host's parallel-for for rnnx's host-independent CPU kernels: ATen's intra-op thread pool.
#pragma once

#include <ATen/Parallel.h>

#include <cstdint>
#include <utility>

namespace rnnx
{
struct AtenParallelFor
{
    template <typename Fn> void operator()(int64_t begin, int64_t end, int64_t grain, Fn&& fn) const
    {
        at::parallel_for(begin, end, grain, std::forward<Fn>(fn));
    }
};
} // namespace rnnx
