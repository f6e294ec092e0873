// The emulated device: launches, the fiber scheduler of a block, barriers and warp collectives.
// See rnnx_cuda_emulation.h for the execution model and what is checked.
#include <sys/mman.h>
#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "emulation_internal.h"
#include "rnnx_cuda_emulation.h"

#if defined(__SANITIZE_ADDRESS__)
#define RNNX_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RNNX_EMU_ASAN 1
#endif
#endif
#ifdef RNNX_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

// Context switches between the scheduler and the fibers. On x86-64 a minimal switch of the callee-saved
// registers (System V ABI: rbx, rbp, r12-r15, the stack pointer, MXCSR and the x87 control word): glibc's
// swapcontext also saves the signal mask with a system call per switch, which made the emulation several
// times slower. Other architectures use swapcontext.
#if defined(__x86_64__)
extern "C" void rnnx_emu_switch_stack(void** save_sp, void* load_sp);
asm(R"(
    .text
    .globl rnnx_emu_switch_stack
    .hidden rnnx_emu_switch_stack
    .type rnnx_emu_switch_stack, @function
rnnx_emu_switch_stack:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size rnnx_emu_switch_stack, .-rnnx_emu_switch_stack
)");
#endif

namespace rnnx
{
namespace emu
{
namespace
{

#if defined(__x86_64__)
struct Context
{
    void* sp = nullptr;
};

//! A context that starts `entry` (which never returns) on [stack, stack + bytes).
void initContext(Context& context, void* stack, size_t bytes, void (*entry)())
{
    auto top = (reinterpret_cast<std::uintptr_t>(stack) + bytes) & ~std::uintptr_t{15};
    auto* slot = reinterpret_cast<uint64_t*>(top);
    *--slot = 0;                                 // entry's return address (never used)
    *--slot = reinterpret_cast<uint64_t>(entry); // where the switch's ret goes
    for (int i = 0; i < 6; ++i)
        *--slot = 0;                                     // rbp, rbx, r12-r15
    *--slot = uint64_t{0x037f} << 32 | uint64_t{0x1f80}; // x87 control word, MXCSR: the defaults
    context.sp = slot;
}

void switchContext(Context& from, Context& to)
{
    rnnx_emu_switch_stack(&from.sp, to.sp);
}
#else
struct Context
{
    ucontext_t uc;
};

void initContext(Context& context, void* stack, size_t bytes, void (*entry)())
{
    getcontext(&context.uc);
    context.uc.uc_stack.ss_sp = stack;
    context.uc.uc_stack.ss_size = bytes;
    context.uc.uc_link = nullptr;
    makecontext(&context.uc, entry, 0);
}

void switchContext(Context& from, Context& to)
{
    swapcontext(&from.uc, &to.uc);
}
#endif

constexpr size_t kStackBytes = 512 * 1024; // per emulated thread (AddressSanitizer needs the room)
constexpr unsigned kWarpSize = 32;
constexpr unsigned kMaxThreadsPerBlock = 1024;

enum class Wait
{
    kRunnable,
    kBlockBarrier,
    kWarpCollective,
    kExited
};

struct Fiber
{
    Context context;
    ThreadIndex index;
    unsigned linear = 0;
    Wait wait = Wait::kRunnable;
    const char* collective = nullptr; // the warp collective it waits at, and where
    Site site{"", 0};
    uint64_t collectives = 0; // warp collectives passed so far
    void* stack = nullptr;
    void* fake_stack = nullptr; // AddressSanitizer's bookkeeping across switches
};

struct WarpState
{
    bool leader_taken = false;             // a lane claimed warpLeader() since the last release
    uint64_t uniform_round = ~uint64_t{0}; // collective round whose uniform values are recorded
    uint64_t uniform[2] = {0, 0};
    alignas(16) float scratch[256];
};

struct BlockRun
{
    std::vector<Fiber> fibers;
    std::vector<WarpState> warps;
    Context scheduler;
    Fiber* current = nullptr;
    const std::function<void()>* body = nullptr;
    void* shared = nullptr;
    std::vector<float> shuffle_slots;
    bool failed = false;
    const void* scheduler_stack_bottom = nullptr;
    size_t scheduler_stack_size = 0;
    void* scheduler_fake_stack = nullptr;
};

struct Device
{
    std::mutex launch_mutex;
    BlockRun* run = nullptr;
    Schedule schedule = Schedule::kInOrder;
    uint64_t seed = 0;
    std::mt19937_64 rng;
    Stats stats{};
    std::map<const void*, int> shared_limits;
    std::string failure;
    std::vector<void*> stacks;

    void* stack(size_t i)
    {
        while (stacks.size() <= i)
        {
            void* s = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (s == MAP_FAILED)
            {
                std::fprintf(stderr, "rnnx CUDA emulation: cannot map a thread stack\n");
                std::abort();
            }
            stacks.push_back(s);
        }
        return stacks[i];
    }

    ~Device()
    {
        for (void* s : stacks)
            munmap(s, kStackBytes);
    }
};

Device& device()
{
    static Device d;
    return d;
}

//! Records a failed launch or call: the message for takeLaunchErrorMessage() and the error for
//! cudaGetLastError(). Returns `error`.
cudaError_t recordFailure(cudaError_t error, std::string message)
{
    device().failure = std::move(message);
    setLastError(error);
    return error;
}

BlockRun& activeRun(const char* what)
{
    BlockRun* run = device().run;
    if (run == nullptr || run->current == nullptr)
    {
        std::fprintf(stderr, "rnnx CUDA emulation: %s called outside a kernel\n", what);
        std::abort();
    }
    return *run;
}

// Switches between the scheduler's stack and a fiber's, with AddressSanitizer told about each switch.
void switchToFiber(BlockRun& run, Fiber& fiber)
{
    run.current = &fiber;
#ifdef RNNX_EMU_ASAN
    __sanitizer_start_switch_fiber(&run.scheduler_fake_stack, fiber.stack, kStackBytes);
#endif
    switchContext(run.scheduler, fiber.context);
#ifdef RNNX_EMU_ASAN
    __sanitizer_finish_switch_fiber(run.scheduler_fake_stack, nullptr, nullptr);
#endif
    run.current = nullptr;
}

void switchToScheduler(BlockRun& run, bool exiting)
{
    Fiber& fiber = *run.current;
#ifdef RNNX_EMU_ASAN
    __sanitizer_start_switch_fiber(
        exiting ? nullptr : &fiber.fake_stack, run.scheduler_stack_bottom, run.scheduler_stack_size);
#else
    (void)exiting;
#endif
    switchContext(fiber.context, run.scheduler);
#ifdef RNNX_EMU_ASAN
    __sanitizer_finish_switch_fiber(fiber.fake_stack, &run.scheduler_stack_bottom, &run.scheduler_stack_size);
#endif
}

void fiberMain()
{
    BlockRun& run = *device().run;
#ifdef RNNX_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &run.scheduler_stack_bottom, &run.scheduler_stack_size);
#endif
    (*run.body)();
    run.current->wait = Wait::kExited;
    switchToScheduler(run, true);
}

void wait(BlockRun& run, Wait reason, const char* collective, Site site)
{
    run.current->wait = reason;
    run.current->collective = collective;
    run.current->site = site;
    switchToScheduler(run, false);
}

std::string describeCollective(const Fiber& fiber)
{
    return std::string(fiber.collective) + " at " + fiber.site.file + ":" + std::to_string(fiber.site.line);
}

bool sameCollective(const Fiber& a, const Fiber& b)
{
    return a.collectives == b.collectives && a.site.line == b.site.line && std::strcmp(a.collective, b.collective) == 0
        && std::strcmp(a.site.file, b.site.file) == 0;
}

std::vector<size_t> order(size_t n, std::mt19937_64& rng)
{
    std::vector<size_t> indices(n);
    std::iota(indices.begin(), indices.end(), size_t{0});
    switch (device().schedule)
    {
    case Schedule::kInOrder: break;
    case Schedule::kReversed: std::reverse(indices.begin(), indices.end()); break;
    case Schedule::kRandom: std::shuffle(indices.begin(), indices.end(), rng); break;
    }
    return indices;
}

std::string describeBlock(const ThreadIndex& index)
{
    char text[96];
    std::snprintf(text, sizeof(text), "block (%u, %u, %u)", index.block.x, index.block.y, index.block.z);
    return text;
}

//! Releases the warps whose lanes all wait at the same collective; fails on a warp whose lanes don't.
//! Returns whether any warp was released.
bool releaseWarps(BlockRun& run, Stats& stats)
{
    bool released = false;
    const size_t n = run.fibers.size();
    for (size_t first = 0; first < n; first += kWarpSize)
    {
        const size_t last = std::min(n, first + kWarpSize);
        size_t waiting = 0;
        for (size_t i = first; i < last; ++i)
            waiting += run.fibers[i].wait == Wait::kWarpCollective;
        if (waiting == 0)
            continue;
        const Fiber& lead = run.fibers[first];
        const std::string where = describeBlock(lead.index) + ", warp " + std::to_string(first / kWarpSize) + ": ";
        if (waiting != last - first)
        {
            const Fiber* at = nullptr;
            for (size_t i = first; i < last && at == nullptr; ++i)
            {
                if (run.fibers[i].wait == Wait::kWarpCollective)
                    at = &run.fibers[i];
            }
            run.failed = true;
            recordFailure(cudaErrorLaunchFailure,
                where + describeCollective(*at) + " reached by " + std::to_string(waiting) + " of "
                    + std::to_string(last - first) + " lanes (the others wait at __syncthreads or have exited)");
            return false;
        }
        for (size_t i = first + 1; i < last; ++i)
        {
            const Fiber& lane = run.fibers[i];
            if (!sameCollective(lane, lead))
            {
                run.failed = true;
                recordFailure(cudaErrorLaunchFailure,
                    where + "lanes at different warp collectives: lane 0 at " + describeCollective(lead)
                        + " (collective #" + std::to_string(lead.collectives) + "), lane " + std::to_string(i - first)
                        + " at " + describeCollective(lane) + " (collective #" + std::to_string(lane.collectives)
                        + ")");
                return false;
            }
        }
        for (size_t i = first; i < last; ++i)
        {
            run.fibers[i].wait = Wait::kRunnable;
            run.fibers[i].collectives += 1;
        }
        run.warps[first / kWarpSize].leader_taken = false;
        stats.warp_collectives += 1;
        released = true;
    }
    return released;
}

//! Runs every thread of one block to completion; false when the launch failed.
bool runBlock(BlockRun& run, const ThreadIndex& block_index, std::mt19937_64& rng)
{
    Device& dev = device();
    const dim3 bd = block_index.block_dim;
    const size_t n = static_cast<size_t>(bd.x) * bd.y * bd.z;
    run.fibers.assign(n, Fiber{});
    run.shuffle_slots.assign(n, 0.f);
    run.warps.assign((n + kWarpSize - 1) / kWarpSize, WarpState{});
    for (size_t i = 0; i < n; ++i)
    {
        Fiber& f = run.fibers[i];
        f.linear = static_cast<unsigned>(i);
        f.index = block_index;
        f.index.thread = dim3(static_cast<unsigned>(i % bd.x), static_cast<unsigned>((i / bd.x) % bd.y),
            static_cast<unsigned>(i / (static_cast<size_t>(bd.x) * bd.y)));
        f.stack = dev.stack(i);
#ifdef RNNX_EMU_ASAN
        // A pooled stack may hold the poisoned frames of a fiber abandoned by a failed launch.
        __asan_unpoison_memory_region(f.stack, kStackBytes);
#endif
        initContext(f.context, f.stack, kStackBytes, fiberMain);
    }
    dev.stats.threads += n;
    for (;;)
    {
        for (size_t i : order(n, rng))
        {
            if (run.fibers[i].wait != Wait::kRunnable)
                continue;
            switchToFiber(run, run.fibers[i]);
            if (run.failed)
                return false;
        }
        if (releaseWarps(run, dev.stats))
            continue;
        if (run.failed)
            return false;
        size_t at_barrier = 0;
        for (Fiber& f : run.fibers)
            at_barrier += f.wait == Wait::kBlockBarrier;
        if (at_barrier == 0)
            return true; // every thread exited
        for (Fiber& f : run.fibers)
        {
            if (f.wait == Wait::kBlockBarrier)
                f.wait = Wait::kRunnable;
        }
        dev.stats.block_barriers += 1;
    }
}

cudaError_t configurationError(const char* format, unsigned a, unsigned b, unsigned c)
{
    char message[200];
    std::snprintf(message, sizeof(message), format, a, b, c);
    return recordFailure(cudaErrorInvalidConfiguration, message);
}

} // namespace

const ThreadIndex& currentIndex()
{
    return activeRun("threadIdx / blockIdx").current->index;
}

void syncThreads()
{
    wait(activeRun("__syncthreads"), Wait::kBlockBarrier, "__syncthreads", Site{"", 0});
}

void warpCollective(const char* what, Site site)
{
    wait(activeRun(what), Wait::kWarpCollective, what, site);
}

float shuffleXor(unsigned mask, float value, int lane_mask, int width, Site site)
{
    BlockRun& run = activeRun("__shfl_xor_sync");
    if (mask != 0xffffffffu || width != static_cast<int>(kWarpSize) || lane_mask < 0
        || lane_mask >= static_cast<int>(kWarpSize))
    {
        failLaunch(cudaErrorNotSupported, "__shfl_xor_sync: the emulation supports full-warp masks and width 32");
    }
    const unsigned self = run.current->linear;
    const unsigned partner = (self & ~(kWarpSize - 1)) | ((self % kWarpSize) ^ static_cast<unsigned>(lane_mask));
    run.shuffle_slots[self] = value;
    warpCollective("__shfl_xor_sync", site);
    const float result = run.shuffle_slots[partner];
    warpCollective("__shfl_xor_sync", site); // nobody overwrites a slot before every lane has read
    return result;
}

void countMma()
{
    device().stats.mma += 1;
}

bool warpLeader()
{
    BlockRun& run = activeRun("warpLeader");
    WarpState& warp = run.warps[run.current->linear / kWarpSize];
    if (warp.leader_taken)
        return false;
    warp.leader_taken = true;
    return true;
}

float* warpScratch()
{
    BlockRun& run = activeRun("warpScratch");
    return run.warps[run.current->linear / kWarpSize].scratch;
}

void checkWarpUniform(const char* what, uint64_t value0, uint64_t value1)
{
    BlockRun& run = activeRun(what);
    WarpState& warp = run.warps[run.current->linear / kWarpSize];
    if (warp.uniform_round != run.current->collectives)
    {
        warp.uniform_round = run.current->collectives;
        warp.uniform[0] = value0;
        warp.uniform[1] = value1;
    }
    else if (warp.uniform[0] != value0 || warp.uniform[1] != value1)
    {
        char message[200];
        std::snprintf(message, sizeof(message), "%s: arguments differ between lanes of warp %u (must be warp-uniform)",
            what, run.current->linear / kWarpSize);
        failLaunch(cudaErrorLaunchFailure, message);
    }
}

void* dynamicSharedMemory()
{
    return activeRun("dynamic shared memory").shared;
}

void failLaunch(cudaError_t error, const char* message)
{
    BlockRun& run = activeRun("failLaunch");
    recordFailure(
        error, describeBlock(run.current->index) + ", thread " + std::to_string(run.current->linear) + ": " + message);
    run.failed = true;
    run.current->wait = Wait::kExited;
    switchToScheduler(run, true);
    std::abort(); // never resumed
}

cudaError_t launch(const std::function<void()>& body, dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
    const void* kernel)
{
    Device& dev = device();
    std::lock_guard<std::mutex> lock(dev.launch_mutex);
    if (dev.run != nullptr)
    {
        return recordFailure(cudaErrorNotSupported, "a kernel launched a kernel (not supported by the emulation)");
    }
    const size_t threads = static_cast<size_t>(block.x) * block.y * block.z;
    if (threads == 0 || threads > kMaxThreadsPerBlock || block.z > 64)
    {
        return configurationError("block (%u, %u, %u): 1 to 1024 threads, z <= 64", block.x, block.y, block.z);
    }
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
    {
        return configurationError("grid (%u, %u, %u): x in 1..2^31-1, y and z in 1..65535", grid.x, grid.y, grid.z);
    }
    const auto limit = dev.shared_limits.find(kernel);
    const int shared_limit = limit == dev.shared_limits.end() ? kDefaultShared : limit->second;
    if (shared_bytes > static_cast<size_t>(shared_limit))
    {
        return recordFailure(cudaErrorInvalidValue,
            std::to_string(shared_bytes) + " bytes of dynamic shared memory, over the kernel's limit of "
                + std::to_string(shared_limit) + " (cudaFuncAttributeMaxDynamicSharedMemorySize)");
    }
    if (!isValidStream(stream))
    {
        return recordFailure(
            cudaErrorInvalidResourceHandle, "launch on a stream that was not created or was destroyed");
    }

    dev.stats.launches += 1;
    dev.stats.max_shared_bytes = std::max<uint64_t>(dev.stats.max_shared_bytes, shared_bytes);
    std::mt19937_64 rng(dev.seed ^ (dev.stats.launches * 0x9e3779b97f4a7c15ull));
    void* shared = nullptr;
    if (shared_bytes > 0)
    {
        if (posix_memalign(&shared, 128, shared_bytes) != 0)
            return cudaErrorMemoryAllocation;
    }
    BlockRun run;
    run.body = &body;
    run.shared = shared;
    dev.run = &run;

    std::vector<dim3> blocks;
    for (unsigned z = 0; z < grid.z; ++z)
    {
        for (unsigned y = 0; y < grid.y; ++y)
        {
            for (unsigned x = 0; x < grid.x; ++x)
                blocks.emplace_back(x, y, z);
        }
    }
    bool ok = true;
    for (size_t b : order(blocks.size(), rng))
    {
        if (shared != nullptr)
            std::memset(shared, 0xff, shared_bytes); // uninitialised: NaN pattern
        ThreadIndex index{dim3(0, 0, 0), blocks[b], block, grid};
        dev.stats.blocks += 1;
        if (!runBlock(run, index, rng))
        {
            ok = false;
            break;
        }
    }
    dev.run = nullptr;
    std::free(shared);
    return ok ? cudaSuccess : peekLastError();
}

cudaError_t setFuncAttribute(const void* kernel, cudaFuncAttribute attribute, int value)
{
    ++device().stats.attribute_calls;
    if (attribute != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return cudaSuccess;
    if (value < 0 || value > kMaxSharedOptIn)
    {
        return recordFailure(cudaErrorInvalidValue,
            "cudaFuncAttributeMaxDynamicSharedMemorySize " + std::to_string(value)
                + " is over the device's opt-in limit of " + std::to_string(kMaxSharedOptIn) + " bytes");
    }
    device().shared_limits[kernel] = value;
    return cudaSuccess;
}

void setSchedule(Schedule schedule, uint64_t seed)
{
    device().schedule = schedule;
    device().seed = seed;
}

Stats stats()
{
    return device().stats;
}

void resetStats()
{
    device().stats = Stats{};
}

void forgetFunctionAttributes()
{
    device().shared_limits.clear();
}

std::string takeLaunchErrorMessage()
{
    std::string message;
    message.swap(device().failure);
    return message;
}

} // namespace emu
} // namespace rnnx
