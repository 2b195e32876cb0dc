// Delayed scaling's amax history on the device (layout in quantize.h: a header, then a
// ring of float amaxes), so a training step pushes the amax and computes the next scale
// without the host: DelayedState::push (core/fp8/scaling.cpp) in one CTA.
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda {

namespace {

constexpr int kThreads = 256;

int ring_length(const DelayedScaling& r) { return std::max(1, r.history); }

// A dependent launch: the entries that stay in the history are scanned while the cast
// before it still runs (neither touches them); only the newest amax waits for the cast.
__global__ void __launch_bounds__(kThreads) delayed_push_kernel(DelayedStateHeader* st, Format f, AmaxAlgo algo,
                                                                int margin, const float* amax) {
    float* ring = reinterpret_cast<float*>(st + 1);
    const int len = st->length, head = st->head, count = st->count;
    // Max over the history after the push, but for the newest: its last min(count, len - 1)
    // entries before head. Any NaN makes the max NaN (the CPU's loop).
    float m = -__uint_as_float(qk::kInfBits);
    int nan = 0;
    if (algo == AmaxAlgo::Max) {
        const int kept = min(count, len - 1), first = head - kept + len;
        for (int i = threadIdx.x; i < kept; i += kThreads) {
            const float h = ring[(first + i) % len];
            nan |= qk::is_nan(h);
            m = m < h ? h : m;
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float other = __shfl_xor_sync(0xFFFFFFFFu, m, o);
            m = m < other ? other : m;
        }
        nan = __any_sync(0xFFFFFFFFu, nan);
        __shared__ float warp_m[kThreads / 32];
        __shared__ int warp_nan[kThreads / 32];
        if ((threadIdx.x & 31) == 0) warp_m[threadIdx.x >> 5] = m, warp_nan[threadIdx.x >> 5] = nan;
        __syncthreads();
        if (threadIdx.x == 0)
            for (int w = 0; w < kThreads / 32; ++w) m = m < warp_m[w] ? warp_m[w] : m, nan |= warp_nan[w];
    }
    if (threadIdx.x != 0) return;
    wait_prior_grid();
    const float newest = *amax;
    ring[head] = newest;
    st->head = (head + 1) % len;
    st->count = min(count + 1, len);
    float ref = newest;  // MostRecent: history_.back()
    if (algo == AmaxAlgo::Max) {
        nan |= qk::is_nan(newest);
        m = m < newest ? newest : m;
        ref = nan ? qk::float_of(qk::kQuietNaNBits) : m;
    }
    st->scale = qk::delayed_next_scale(ref, st->scale, f, margin);
}

}  // namespace

std::size_t delayed_state_bytes(const DelayedScaling& recipe) {
    return sizeof(DelayedStateHeader) + sizeof(float) * std::size_t(ring_length(recipe));
}

void delayed_state_write(void* state, const DelayedState& host, cudaStream_t stream) {
    const int len = ring_length(host.recipe());
    const std::deque<float>& h = host.history();
    const std::size_t keep = std::min<std::size_t>(h.size(), std::size_t(len));
    std::vector<std::uint8_t> buf(delayed_state_bytes(host.recipe()), 0);
    DelayedStateHeader head{host.scale(), int(keep), int(keep % std::size_t(len)), len};
    std::copy_n(reinterpret_cast<const std::uint8_t*>(&head), sizeof head, buf.data());
    float* ring = reinterpret_cast<float*>(buf.data() + sizeof head);
    std::copy(h.end() - std::ptrdiff_t(keep), h.end(), ring);  // newest entries, oldest first
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(state, buf.data(), buf.size(), cudaMemcpyHostToDevice, stream));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
}

DelayedState delayed_state_read(const void* state, const DelayedScaling& recipe, cudaStream_t stream) {
    std::vector<std::uint8_t> buf(delayed_state_bytes(recipe));
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(buf.data(), state, buf.size(), cudaMemcpyDeviceToHost, stream));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
    DelayedStateHeader head;
    std::copy_n(buf.data(), sizeof head, reinterpret_cast<std::uint8_t*>(&head));
    const float* ring = reinterpret_cast<const float*>(buf.data() + sizeof head);
    const int len = ring_length(recipe);
    if (head.length != len || head.count < 0 || head.count > len || head.head < 0 || head.head >= len)
        throw CudaError("delayed_state_read: the device state does not belong to a history of " + std::to_string(len));
    std::deque<float> history;
    for (int i = 0; i < head.count; ++i) history.push_back(ring[(head.head - head.count + i + len) % len]);
    DelayedState out(recipe);
    out.restore(std::move(history), head.scale);
    return out;
}

void delayed_push(void* state, const DelayedScaling& recipe, const float* amax, cudaStream_t stream) {
    launch_dependent(delayed_push_kernel, 1, kThreads, 0, stream, static_cast<DelayedStateHeader*>(state),
                     recipe.format, recipe.algo, recipe.margin, amax);
}

}  // namespace fp8scope::cuda
