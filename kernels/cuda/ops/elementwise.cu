// Elementwise ops and the bias gradient. Each is one pass over memory: 16-byte packs of
// 8 BF16 (or 4 float32) per thread when the pointers are aligned, one element otherwise.
// Float arithmetic uses the _rn intrinsics so nvcc cannot contract it: the results equal
// the CPU backend's bit for bit (its code is built with -ffp-contract=off).
//
// bias_backward, dbias (M) = column sums of dout (N,M), is deterministic without float
// atomics: pass 1 gives each block a fixed range of kBiasRows rows and 32*VEC columns,
// its 8 row lanes sum rows in order and are combined in order into partial (P,M); pass 2
// sums the P partials of each column in order. P depends only on N.
#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

constexpr int kBiasRows = 64;  // rows of dout per block of pass 1
constexpr int kBiasLanes = 8;  // row lanes (threadIdx.y) of a block

struct AddOp {
    __device__ float operator()(float x, float y) const { return __fadd_rn(x, y); }
};

int bias_partials(std::int64_t N) { return int((N + kBiasRows - 1) / kBiasRows); }

// partial (P,M): block (blockIdx.x, blockIdx.y) sums rows [x*kBiasRows, +kBiasRows) of
// columns [(y*32 + tx)*VEC, +VEC).
template <int VEC, class T>
__global__ void column_partials_kernel(float* partial, const T* dout, std::int64_t N, std::int64_t M) {
    __shared__ float lanes[kBiasLanes][VEC][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const std::int64_t col = (std::int64_t(blockIdx.y) * 32 + tx) * VEC;
    const std::int64_t r0 = std::int64_t(blockIdx.x) * kBiasRows;
    const std::int64_t r1 = r0 + kBiasRows < N ? r0 + kBiasRows : N;
    float acc[VEC] = {};
    if (col < M)
        for (std::int64_t r = r0 + ty; r < r1; r += kBiasLanes) {
            float x[VEC];
            load<VEC>(dout + r * M + col, x);
#pragma unroll
            for (int k = 0; k < VEC; ++k) acc[k] += x[k];
        }
#pragma unroll
    for (int k = 0; k < VEC; ++k) lanes[ty][k][tx] = acc[k];
    __syncthreads();
    if (ty == 0 && col < M) {
        float s[VEC];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            s[k] = lanes[0][k][tx];
            for (int l = 1; l < kBiasLanes; ++l) s[k] += lanes[l][k][tx];
        }
        store<VEC>(partial + std::int64_t(blockIdx.x) * M + col, s);
    }
}

template <class T>
void bias_backward_impl(float* dbias, const T* dout, std::int64_t N, std::int64_t M, Workspace ws,
                        cudaStream_t stream) {
    if (M <= 0) return;
    if (N <= 0) {
        FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(dbias, 0, std::size_t(M) * sizeof(float), stream));
        return;
    }
    require_workspace(ws, bias_backward_workspace(N, M), "bias_backward");
    float* partial = static_cast<float*>(ws.ptr);
    const int P = bias_partials(N);
    const dim3 block(32, kBiasLanes);
    if (M > std::int64_t(65535) * 32) throw std::invalid_argument("cuda bias_backward: M too large");
    if (M % kPack == 0 && aligned16(dout) && aligned16(partial)) {
        const dim3 grid(unsigned(P), blocks_for(M / kPack, 32));
        column_partials_kernel<kPack><<<grid, block, 0, stream>>>(partial, dout, N, M);
    } else {
        const dim3 grid(unsigned(P), blocks_for(M, 32));
        column_partials_kernel<1><<<grid, block, 0, stream>>>(partial, dout, N, M);
    }
    FP8SCOPE_CUDA_LAUNCHED();
    sum_partials(dbias, partial, P, M, stream);
}

template <int VEC>
__global__ void scale_kernel(float* x, float factor, std::int64_t n) {
    std::int64_t i = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
    if (i + VEC <= n) {
        float v[VEC];
        load<VEC>(x + i, v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[k] = __fmul_rn(v[k], factor);
        store<VEC>(x + i, v);
    } else {
        for (; i < n; ++i) x[i] = __fmul_rn(x[i], factor);
    }
}

}  // namespace

void add(bf16* out, const bf16* a, const bf16* b, std::int64_t n, cudaStream_t stream) {
    launch_binary(out, a, b, n, AddOp{}, stream);
}

std::size_t bias_backward_workspace(std::int64_t N, std::int64_t M) {
    return N > 0 && M > 0 ? std::size_t(bias_partials(N)) * std::size_t(M) * sizeof(float) : 0;
}

void bias_backward(float* dbias, const bf16* dout, std::int64_t N, std::int64_t M, Workspace ws,
                   cudaStream_t stream) {
    bias_backward_impl(dbias, dout, N, M, ws, stream);
}

void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t M, Workspace ws,
                   cudaStream_t stream) {
    bias_backward_impl(dbias, dout, N, M, ws, stream);
}

void scale(float* x, float factor, std::int64_t n, cudaStream_t stream) {
    if (n <= 0) return;
    if (aligned16(x))
        scale_kernel<4><<<blocks_for((n + 3) / 4, 256), 256, 0, stream>>>(x, factor, n);
    else
        scale_kernel<1><<<blocks_for(n, 256), 256, 0, stream>>>(x, factor, n);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
