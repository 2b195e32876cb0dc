// Host snapshots on the GPU (cuda_backend.h): checkpoints copy the parameters and AdamW
// moments to pinned host memory on a stream of their own while the next steps train.
//
// Ordering: an event recorded on the training stream at start() marks the state to copy;
// the side stream waits for it and copies from there. The next update of those arrays
// (AdamW, a rewind's restore) is issued right after, on the training stream, and must not
// run before the copy has read them: the backend makes it wait on the device for the
// copy's event (fence_writes), never the host.
//
// Staging (when the device can spare the memory; SnapshotStaging): the side stream first
// copies the arrays within device memory (about 2 x bytes / HBM bandwidth: ~15 ms for
// 24 GB on an H200, while the next forward runs), and the fence is that copy's event; the
// slow copy over PCIe (~0.45 s for 24 GB) then reads the staging buffer, which nothing
// else writes, in chunks that wait() issues one at a time on the checkpoint writer's
// thread (see wait()). Direct: the fence is the PCIe copy's own event, so the next AdamW waits
// whenever that copy outlasts the next forward and backward. Both buffers are allocated
// once (the largest copy yet) and kept.
#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_backend_lane.h"
#include "cuda/runtime/check.h"
#include "util/strprintf.h"

namespace fp8scope {
namespace {

class CudaHostSnapshot final : public HostSnapshot {
public:
    CudaHostSnapshot(CudaBackend& backend, SnapshotStaging staging) : backend_(backend), staging_(staging) {
        FP8SCOPE_CUDA_CHECK(cudaSetDevice(backend.device_index()));
        FP8SCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
        FP8SCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&taken_, cudaEventDisableTiming));
        FP8SCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
        FP8SCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&landed_, cudaEventDisableTiming));
    }

    ~CudaHostSnapshot() override {  // never throws: errors mean the context is gone
        cudaStreamSynchronize(side_);
        backend_.fence_writes({}, nullptr);
        if (device_) cudaFree(device_);
        if (host_) cudaFreeHost(host_);
        for (cudaEvent_t e : {taken_, staged_, landed_}) cudaEventDestroy(e);
        cudaStreamDestroy(side_);
    }

    void reserve(std::size_t bytes) override {
        if (bytes <= host_bytes_) return;
        wait();
        if (host_) FP8SCOPE_CUDA_CHECK(cudaFreeHost(host_));
        host_ = nullptr, host_bytes_ = 0;
        FP8SCOPE_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), bytes, cudaHostAllocDefault));
        host_bytes_ = bytes;
    }

    void start(const std::vector<Region>& regions) override {
        wait();  // the last copy is whole (and was read: the contract)
        backend_.fence_writes({}, nullptr);
        std::size_t total = 0;
        for (const Region& r : regions) total += r.bytes;
        reserve(total);
        const bool staged = stage(total);
        FP8SCOPE_CUDA_CHECK(cudaEventRecord(taken_, backend_.stream()));
        FP8SCOPE_CUDA_CHECK(cudaStreamWaitEvent(side_, taken_, 0));
        std::uint8_t* to = staged ? device_ : host_;
        const cudaMemcpyKind kind = staged ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost;
        for (const Region& r : regions) {
            if (r.bytes) FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(to, r.src, r.bytes, kind, side_));
            to += r.bytes;
        }
        if (staged) {
            FP8SCOPE_CUDA_CHECK(cudaEventRecord(staged_, side_));
            backend_.fence_writes(regions, staged_);
            std::lock_guard lock(mu_);
            unsent_ = total;  // to the host in chunks, by wait()
        } else {
            FP8SCOPE_CUDA_CHECK(cudaEventRecord(landed_, side_));
            backend_.fence_writes(regions, landed_);
        }
    }

    // A staged copy goes to the host here, one chunk in flight at a time: the training
    // stream's own small copies to the host (the loss, the gradient norm) share the copy
    // engine's direction and would otherwise queue behind the whole copy.
    void wait() override {
        FP8SCOPE_CUDA_CHECK(cudaSetDevice(backend_.device_index()));  // maybe another thread
        std::lock_guard lock(mu_);
        for (std::size_t at = 0; at < unsent_; at += kChunk) {
            const std::size_t n = std::min(kChunk, unsent_ - at);
            FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(host_ + at, device_ + at, n, cudaMemcpyDeviceToHost, side_));
            FP8SCOPE_CUDA_CHECK(cudaEventRecord(landed_, side_));
            FP8SCOPE_CUDA_CHECK(cudaEventSynchronize(landed_));
        }
        unsent_ = 0;
        FP8SCOPE_CUDA_CHECK(cudaEventSynchronize(landed_));
    }

    const std::uint8_t* host() const override { return host_; }
    std::string route() const override { return route_; }

private:
    // Whether this copy goes through device staging (allocated on first use and kept).
    bool stage(std::size_t bytes) {
        const double gb = double(bytes) / 1e9;
        if (staging_ == SnapshotStaging::Direct) {
            route_ = strprintf("%.2f GB straight over PCIe (staging off)", gb);
            return false;
        }
        route_ = strprintf("%.2f GB staged in device memory, then over PCIe in %zu MB chunks", gb, kChunk >> 20);
        if (bytes <= device_bytes_) return true;
        if (device_) FP8SCOPE_CUDA_CHECK(cudaFree(device_));  // idle: the last copy has landed
        device_ = nullptr, device_bytes_ = 0;
        if (staging_ == SnapshotStaging::Auto) {
            // Room for the copy and an eighth of the device (at least 2 GiB) left over: the
            // training's own buffers may still grow (a longer eval batch, a capture step).
            std::size_t free = 0, all = 0;
            FP8SCOPE_CUDA_CHECK(cudaMemGetInfo(&free, &all));
            const std::size_t spare = std::max<std::size_t>(all / 8, std::size_t(2) << 30);
            if (free < bytes + spare) {
                route_ = strprintf("%.2f GB straight over PCIe: staging needs %.2f GB free (the copy and %.2f GB to "
                                   "spare), the device has %.2f GB; the step after it waits for the copy",
                                   gb, double(bytes + spare) / 1e9, double(spare) / 1e9, double(free) / 1e9);
                return false;
            }
        }
        if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&device_), bytes); e != cudaSuccess) {
            device_ = nullptr;
            (void)cudaGetLastError();  // not sticky: the device goes on
            if (staging_ == SnapshotStaging::Auto) {
                route_ = strprintf("%.2f GB straight over PCIe: no device memory for staging (%s)", gb, cudaGetErrorString(e));
                return false;
            }
            cuda::fail("cudaMalloc (host snapshot staging)", __FILE__, __LINE__, cudaGetErrorString(e));
        }
        device_bytes_ = bytes;
        return true;
    }

    CudaBackend& backend_;
    SnapshotStaging staging_;
    cudaStream_t side_ = nullptr;
    cudaEvent_t taken_ = nullptr, staged_ = nullptr, landed_ = nullptr;
    std::uint8_t* host_ = nullptr;    // pinned
    std::size_t host_bytes_ = 0;
    std::uint8_t* device_ = nullptr;  // staging
    std::size_t device_bytes_ = 0;
    std::string route_ = "no copy yet";
    static constexpr std::size_t kChunk = std::size_t(32) << 20;  // ~2 ms over PCIe
    std::mutex mu_;          // wait() may run on the checkpoint writer's thread
    std::size_t unsent_ = 0;  // bytes of the staging buffer not yet sent to the host
};

}  // namespace

// Auto may be overridden from the environment: FP8SCOPE_SNAPSHOT_STAGING=auto|staging|direct
// (bench_checkpoint's --staging; a device whose spare memory Auto misjudges).
std::unique_ptr<HostSnapshot> CudaBackend::make_host_snapshot(SnapshotStaging staging) {
    if (const char* env = std::getenv("FP8SCOPE_SNAPSHOT_STAGING"); env && staging == SnapshotStaging::Auto) {
        const std::string v = env;
        if (v == "staging") staging = SnapshotStaging::Staging;
        else if (v == "direct") staging = SnapshotStaging::Direct;
        else if (v != "auto" && !v.empty())
            throw std::invalid_argument("FP8SCOPE_SNAPSHOT_STAGING is '" + v + "', expected auto, staging or direct");
    }
    return std::make_unique<CudaHostSnapshot>(*this, staging);
}

void CudaBackend::fence_writes(std::vector<HostSnapshot::Region> regions, cudaEvent_t copied) {
    fenced_ = std::move(regions);
    fence_ = copied;
}

void CudaBackend::before_write(const void* dst, std::size_t bytes) {
    if (fenced_.empty()) return;
    const auto d = reinterpret_cast<std::uintptr_t>(dst);
    for (const HostSnapshot::Region& r : fenced_) {
        const auto s = reinterpret_cast<std::uintptr_t>(r.src);
        if (d < s + r.bytes && s < d + bytes) {
            FP8SCOPE_CUDA_CHECK(cudaStreamWaitEvent(stream(), fence_, 0));
            // Every later op of the training stream runs after the copy; a communicator's
            // stream (set_stream) or a lane (each run's own, while open) waited for itself only.
            if (!open_ && stream() == main_->owned) fenced_.clear();
            return;
        }
    }
}

}  // namespace fp8scope
