// The CUDA backend's lanes (RunLanes; design in cuda_backend.h): one stream per lane with
// its own reused buffers, the calling thread's lane found through a thread-local, and
// events that order the lanes after the main stream when they open and the main stream
// after them when they close.
#include <stdexcept>
#include <string>

#include "cuda/cuda_backend.h"
#include "cuda/cuda_backend_lane.h"
#include "cuda/runtime/check.h"

namespace fp8scope {
namespace {

// The lane the calling thread entered, and whose backend it belongs to.
thread_local const CudaBackend* t_backend = nullptr;
thread_local CudaBackend::Lane* t_lane = nullptr;

}  // namespace

CudaBackend::Lane::Lane(CudaBackend& backend) {
    FP8SCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&owned, cudaStreamNonBlocking));
    stream = owned;
    FP8SCOPE_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    runner = std::make_unique<cuda::GemmRunner>(stream);
    for (auto* s : {&workspace, &head_weight, &emulated_a, &emulated_b, &results, &decay_runs, &output_error_sums})
        *s = std::make_unique<Scratch>(backend);
    results->grow(kResultBytes);
    FP8SCOPE_CUDA_CHECK(cudaMallocHost(&host_results, kResultBytes));
}

// After the device was drained (~CudaBackend): the buffers, then the stream.
CudaBackend::Lane::~Lane() {
    if (report_device) cudaFree(report_device);
    if (report_host) cudaFreeHost(report_host);
    if (host_results) cudaFreeHost(host_results);
    if (nonfinite_host) cudaFreeHost(nonfinite_host);
    for (auto* s : {&workspace, &head_weight, &emulated_a, &emulated_b, &results, &decay_runs, &output_error_sums})
        s->reset();
    runner.reset();
    if (done) cudaEventDestroy(done);
    if (owned) cudaStreamDestroy(owned);
}

CudaBackend::Lane& CudaBackend::lane() const { return t_backend == this && t_lane ? *t_lane : *main_; }

cudaStream_t CudaBackend::stream() const { return lane().stream; }

cudaStream_t CudaBackend::set_stream(cudaStream_t s) { return std::exchange(lane().stream, s); }

std::int64_t CudaBackend::emulated_gemms() const {
    std::int64_t n = main_->emulated_gemms;
    for (const auto& l : lanes_) n += l->emulated_gemms;
    return n;
}

void CudaBackend::open_lanes(int n) {
    if (n < 1 || n > kMaxLanes)
        throw std::invalid_argument("cuda open_lanes: " + std::to_string(n) + " lanes, expected 1 to " +
                                    std::to_string(kMaxLanes));
    if (open_) throw std::logic_error("cuda open_lanes: lanes are open already");
    while (int(lanes_.size()) < n) lanes_.push_back(std::make_unique<Lane>(*this));
    FP8SCOPE_CUDA_CHECK(cudaEventRecord(main_->done, main_->stream));
    for (int i = 0; i < n; ++i) FP8SCOPE_CUDA_CHECK(cudaStreamWaitEvent(lanes_[std::size_t(i)]->stream, main_->done, 0));
    open_ = n;
}

void CudaBackend::close_lanes() {
    for (int i = 0; i < open_; ++i) {
        Lane& l = *lanes_[std::size_t(i)];
        FP8SCOPE_CUDA_CHECK(cudaEventRecord(l.done, l.stream));
        FP8SCOPE_CUDA_CHECK(cudaStreamWaitEvent(main_->stream, l.done, 0));
    }
    open_ = 0;
}

void CudaBackend::enter_lane(int i) {
    if (i < 0 || i >= open_)
        throw std::logic_error("cuda enter_lane: lane " + std::to_string(i) + " of " + std::to_string(open_) + " open");
    // The device is per thread in the runtime: a pool thread may not have chosen ours yet.
    FP8SCOPE_CUDA_CHECK(cudaSetDevice(device_));
    t_backend = this;
    t_lane = lanes_[std::size_t(i)].get();
}

void CudaBackend::leave_lane() {
    t_backend = nullptr;
    t_lane = nullptr;
}

}  // namespace fp8scope
