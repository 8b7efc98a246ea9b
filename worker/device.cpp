/*
 * device.cpp - the device the worker measures on: the counting CPU
 * allocator, live bytes and their peak (on CPU from that allocator, on
 * cuda:N from the caching allocator's statistics), timers, and the
 * description a profile carries (docs/worker.md, "How a stage is measured").
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <ATen/Parallel.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#ifdef REMAT_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime_api.h>
#endif

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "shim_private.h"

namespace rw
{

namespace
{

/* ------------------------------------------------------------------------
 * The CPU counting allocator.  oneDNN's raw_allocate insists that a DataPtr's
 * context is its data pointer, so the size of each block lives in a side
 * table under a lock instead.  The state is allocated once and never freed:
 * libtorch frees static tensors after our statics would be destroyed.
 */

struct CpuCounts {
    std::mutex lock;
    std::unordered_map<void *, size_t> sizes;
    int64_t current = 0;
    int64_t peak = 0;
    int64_t limit = 0; /* 0: none */
    /* Device::trace_start: every allocation (+bytes) and free (-bytes)
     * in order, while tracing. */
    bool tracing = false;
    std::vector<int64_t> trace;
};

CpuCounts *cpu_counts = nullptr;

void counting_free(void *p)
{
    if (p == nullptr)
        return;
    {
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        auto it = cpu_counts->sizes.find(p);
        if (it != cpu_counts->sizes.end()) {
            cpu_counts->current -= (int64_t)it->second;
            if (cpu_counts->tracing)
                cpu_counts->trace.push_back(-(int64_t)it->second);
            cpu_counts->sizes.erase(it);
        }
    }
    std::free(p);
}

c10::DataPtr counting_allocate(size_t n)
{
    void *p = nullptr;
    if (n > 0) {
        {
            std::lock_guard<std::mutex> g(cpu_counts->lock);
            if (cpu_counts->limit > 0 && cpu_counts->current + (int64_t)n > cpu_counts->limit)
                TORCH_CHECK(false, "CPU out of memory: tried to allocate ", n, " bytes with ",
                            cpu_counts->current, " bytes live (the worker's limit is ",
                            cpu_counts->limit, " bytes)");
        }
        /* 64-byte alignment, as c10's own CPU allocator gives. */
        if (posix_memalign(&p, 64, n) != 0)
            TORCH_CHECK(false, "CPU out of memory: cannot allocate ", n, " bytes");
        std::lock_guard<std::mutex> g(cpu_counts->lock);
        cpu_counts->sizes[p] = n;
        cpu_counts->current += (int64_t)n;
        cpu_counts->peak = std::max(cpu_counts->peak, cpu_counts->current);
        if (cpu_counts->tracing)
            cpu_counts->trace.push_back((int64_t)n);
    }
    return {p, p, &counting_free, c10::Device(c10::DeviceType::CPU)};
}

struct CountingAllocator final : c10::Allocator {
#ifdef REMAT_TORCH_ALLOCATE_CONST
    c10::DataPtr allocate(size_t n) const override
    {
        return counting_allocate(n);
    }
#else
    c10::DataPtr allocate(size_t n) override
    {
        return counting_allocate(n);
    }
#endif
    c10::DeleterFnPtr raw_deleter() const override
    {
        return &counting_free;
    }
#ifdef REMAT_TORCH_HAS_COPY_DATA
    void copy_data(void *dest, const void *src, std::size_t count) const override
    {
        std::memcpy(dest, src, count);
    }
#endif
};

CountingAllocator *counting_allocator = nullptr;

/* The one device of this process (shim.h: rw_open is called once). */
Device g_device;

/* Makes the CUDA context and cuBLAS's handle before any measurement: a
 * forward and a backward through a matrix product.  The backward runs on
 * autograd's device thread, which has no current context of its own.
 * Compiled on every build so that CPU builds check it too. */
[[maybe_unused]] void warm_up(const c10::Device &dev)
{
    at::zeros({1}, at::TensorOptions().device(dev)).sum().item<float>();
    auto a = at::ones({8, 8}, at::TensorOptions().device(dev)).requires_grad_(true);
    at::mm(a, a).sum().backward();
}

} // namespace

int64_t Device::current() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda)
        return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
            .allocated_bytes[0]
            .current;
#endif
    std::lock_guard<std::mutex> g(cpu_counts->lock);
    return cpu_counts->current;
}

int64_t Device::peak() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda)
        return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
            .allocated_bytes[0]
            .peak;
#endif
    std::lock_guard<std::mutex> g(cpu_counts->lock);
    return cpu_counts->peak;
}

int64_t Device::reserved() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda)
        return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
            .reserved_bytes[0]
            .current;
#endif
    return -1;
}

int64_t Device::reserved_peak() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda)
        return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
            .reserved_bytes[0]
            .peak;
#endif
    return -1;
}

int64_t Device::requested_peak() const
{
#if defined(REMAT_TORCH_CUDA) && defined(REMAT_TORCH_HAS_REQUESTED)
    if (cuda)
        return (int64_t)c10::cuda::CUDACachingAllocator::getDeviceStats(index)
            .requested_bytes[0]
            .peak;
#endif
    return -1;
}

void Device::reset_peak() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda) {
        c10::cuda::CUDACachingAllocator::resetPeakStats(index);
        return;
    }
#endif
    std::lock_guard<std::mutex> g(cpu_counts->lock);
    cpu_counts->peak = cpu_counts->current;
}

void Device::trace_start() const
{
    if (cuda)
        throw Failure("allocation traces are taken on CPU only");
    std::lock_guard<std::mutex> g(cpu_counts->lock);
    cpu_counts->trace.clear();
    cpu_counts->tracing = true;
}

std::vector<int64_t> Device::trace_stop() const
{
    std::lock_guard<std::mutex> g(cpu_counts->lock);
    cpu_counts->tracing = false;
    std::vector<int64_t> out;
    out.swap(cpu_counts->trace);
    return out;
}

void Device::sync() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda)
        c10::cuda::device_synchronize();
#endif
}

void Device::release_cache() const
{
#ifdef REMAT_TORCH_CUDA
    if (cuda)
        c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

void open_device(const std::string &dev, long long cpu_limit_bytes)
{
    if (cpu_counts == nullptr) {
        cpu_counts = new CpuCounts();
        counting_allocator = new CountingAllocator();
        c10::SetCPUAllocator(counting_allocator, 100);
    }
    cpu_counts->limit = cpu_limit_bytes > 0 ? cpu_limit_bytes : 0;
    if (dev == "cpu") {
        g_device = Device();
    } else if (dev.rfind("cuda", 0) == 0) {
#ifdef REMAT_TORCH_CUDA
#ifdef REMAT_TORCH_HAS_REQUESTED
        /* Expandable segments (libtorch 2.1+), unless the user configured
         * the allocator: blocks are never handed out whole with an unsplit
         * tail, so the allocated bytes are what the tensors asked for
         * (rounded to 512): on an H200 every plan's peak was predicted to
         * 0.001% (up to 1.3% off with classic segments), and the allocator
         * held 0.5-38% above the peak instead of 19-98% (docs/accuracy.md,
         * "GPU (NVIDIA H200)").  Read when the allocator starts, below. */
        if (getenv("PYTORCH_CUDA_ALLOC_CONF") == nullptr && getenv("PYTORCH_ALLOC_CONF") == nullptr)
            setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 0);
#endif
        int idx = dev.size() > 5 ? std::atoi(dev.c_str() + 5) : 0;
        if (idx < 0 || idx >= (int)c10::cuda::device_count())
            throw Failure("device " + dev + ": " + std::to_string(c10::cuda::device_count()) +
                          " CUDA devices visible");
        g_device.cuda = true;
        g_device.index = idx;
        g_device.dev = c10::Device(c10::DeviceType::CUDA, (c10::DeviceIndex)idx);
        c10::cuda::set_device((c10::DeviceIndex)idx);
        warm_up(g_device.dev);
#else
        throw Failure("device " + dev + ": this worker was built without CUDA");
#endif
    } else {
        throw Failure("device must be cpu or cuda:N, not " + dev);
    }
}

const Device &the_device()
{
    return g_device;
}

/* ------------------------------------------------------------------------
 * Timers.
 */

#ifdef REMAT_TORCH_CUDA
struct Timer::Events {
    at::cuda::CUDAEvent e0{cudaEventDefault}, e1{cudaEventDefault};
};
#else
struct Timer::Events {
};
#endif

Timer::Timer(const Device &dev) : d(dev)
{
#ifdef REMAT_TORCH_CUDA
    if (d.cuda)
        ev.reset(new Events());
#endif
}

Timer::~Timer() = default;

void Timer::start()
{
#ifdef REMAT_TORCH_CUDA
    if (d.cuda) {
        ev->e0.record();
        return;
    }
#endif
    t0 = std::chrono::steady_clock::now();
}

double Timer::stop_ms()
{
#ifdef REMAT_TORCH_CUDA
    if (d.cuda) {
        ev->e1.record();
        ev->e1.synchronize();
        return (double)ev->e0.elapsed_time(ev->e1);
    }
#endif
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/* ------------------------------------------------------------------------
 * What a profile says about the device.
 */

json_t *device_info_json(const Device &d)
{
    std::string name = "cpu", driver = "none";
#ifdef REMAT_TORCH_CUDA
    if (d.cuda) {
        cudaDeviceProp *prop = at::cuda::getDeviceProperties(d.index);
        name = prop->name;
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        driver = "CUDA driver " + std::to_string(drv / 1000) + "." +
                 std::to_string(drv % 1000 / 10) + ", runtime " + std::to_string(rt / 1000) + "." +
                 std::to_string(rt % 1000 / 10);
    }
#endif
    if (!d.cuda)
        driver = "cpu, " + std::to_string(at::get_num_threads()) + " threads";
    return json_pack("{s:s, s:s, s:s}", "device", name.c_str(), "driver", driver.c_str(),
                     "libtorch", TORCH_VERSION);
}

void check_device_matches(const json_t *spec, const Device &d)
{
    std::string want = jstr(spec, "device", "");
    if (want.empty())
        return;
    bool cuda_wanted = want.rfind("cuda", 0) == 0;
    if (cuda_wanted != d.cuda)
        throw Failure("the job wants device " + want + " but this worker runs on " +
                          (d.cuda ? "cuda:" + std::to_string(d.index) : std::string("cpu")),
                      true);
}

} // namespace rw
