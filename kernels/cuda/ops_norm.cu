// LayerNorm and RMSNorm over the last dimension C of N rows (BF16 in and out, float32
// weight, bias and statistics). One kernel template serves both (LN = false drops the
// mean and the bias).
//
// Forward: one block per row. The row is read from memory once, converted to float32
// into shared memory (laid out k-major so each thread's VEC values sit in different
// banks), and the statistics are two fixed-tree block sums in float32 over it (mean, then
// squared deviations: the two-pass variance, no cancellation).
//
// Backward adds into dinp (the residual stream's gradient collects several contributions,
// as on the CPU) and overwrites dweight, dbias. Those are column sums over rows; to stay
// deterministic without float atomics, each block owns a fixed range of rows (the range
// depends only on N), every thread owns fixed channels and accumulates their sums over
// its rows in order in shared memory, the block writes one partial row (P,C), and a
// second pass sums the P partials of each channel in order.
// Shapes: N rows, C channels, P row blocks of backward.
#include <algorithm>

#include "cpu/ops/norm.h"
#include "cuda/ops_common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

constexpr std::int64_t kMaxPartials = 512;   // row blocks of backward (fewer for small N)
constexpr int kMaxSmem = 227 * 1024;          // dynamic shared memory a Hopper block may opt into

std::int64_t rows_per_block(std::int64_t N) { return std::max<std::int64_t>(1, (N + kMaxPartials - 1) / kMaxPartials); }
int partials(std::int64_t N) { return int((N + rows_per_block(N) - 1) / rows_per_block(N)); }

int row_threads(int units) { return std::min(256, std::max(32, round_up(units, 32))); }

template <int VEC, bool LN>
__global__ void norm_forward_kernel(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight,
                                    const float* bias, int C) {
    extern __shared__ float row[];  // (VEC, units): value k of unit u at row[k * units + u]
    __shared__ float scratch[32];
    const std::int64_t n = blockIdx.x;
    const bf16* x = inp + n * C;
    const int units = C / VEC;

    float sum = 0.0f;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
        float v[VEC];
        load<VEC>(x + u * VEC, v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            row[k * units + u] = v[k];
            sum += v[k];
        }
    }
    float m = 0.0f;
    if constexpr (LN) m = block_sum(sum, scratch) / float(C);
    float sq = 0.0f;
    for (int u = threadIdx.x; u < units; u += blockDim.x)
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = row[k * units + u] - m;
            sq += d * d;
        }
    const float r = 1.0f / sqrtf(block_sum(sq, scratch) / float(C) + ops::kNormEps);

    bf16* o = out + n * C;
    for (int u = threadIdx.x; u < units; u += blockDim.x) {
        float w[VEC], b[VEC], y[VEC];
        load<VEC>(weight + u * VEC, w);
        if constexpr (LN) load<VEC>(bias + u * VEC, b);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            y[k] = (row[k * units + u] - m) * r * w[k];
            if constexpr (LN) y[k] += b[k];
        }
        store<VEC>(o + u * VEC, y);
    }
    if (threadIdx.x == 0) {
        if constexpr (LN) mean[n] = m;
        rstd[n] = r;
    }
}

// dinp (N,C) += dx of rows [blockIdx.x * R, +R); partial_w (P,C) (and partial_b) = the
// block's sums of dout * xhat (and dout) per channel.
template <int VEC, bool LN>
__global__ void norm_backward_kernel(bf16* dinp, float* partial_w, float* partial_b, const bf16* dout,
                                     const bf16* inp, const float* weight, const float* mean, const float* rstd,
                                     std::int64_t N, int C, std::int64_t R) {
    extern __shared__ float acc[];  // acc_w (VEC, units), then acc_b (VEC, units) for LN
    __shared__ float2 scratch[32];
    const int units = C / VEC;
    float* acc_w = acc;
    float* acc_b = acc + C;
    for (int u = threadIdx.x; u < units; u += blockDim.x)
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            acc_w[k * units + u] = 0.0f;
            if constexpr (LN) acc_b[k * units + u] = 0.0f;
        }

    const std::int64_t r0 = std::int64_t(blockIdx.x) * R;
    const std::int64_t r1 = r0 + R < N ? r0 + R : N;
    for (std::int64_t n = r0; n < r1; ++n) {
        const bf16* d_row = dout + n * C;
        const bf16* x_row = inp + n * C;
        const float m = LN ? mean[n] : 0.0f, r = rstd[n];
        // dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = w * dout
        float sd = 0.0f, sdx = 0.0f;
        for (int u = threadIdx.x; u < units; u += blockDim.x) {
            float d[VEC], x[VEC], w[VEC];
            load<VEC>(d_row + u * VEC, d);
            load<VEC>(x_row + u * VEC, x);
            load<VEC>(weight + u * VEC, w);
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float xhat = (x[k] - m) * r;
                const float dxhat = w[k] * d[k];
                sd += dxhat;
                sdx += dxhat * xhat;
                acc_w[k * units + u] += d[k] * xhat;
                if constexpr (LN) acc_b[k * units + u] += d[k];
            }
        }
        const float2 s = block_sum2(sd, sdx, scratch);
        const float md = LN ? s.x / float(C) : 0.0f, mdx = s.y / float(C);
        bf16* dx_row = dinp + n * C;
        for (int u = threadIdx.x; u < units; u += blockDim.x) {
            float d[VEC], x[VEC], w[VEC], dx[VEC];
            load<VEC>(d_row + u * VEC, d);
            load<VEC>(x_row + u * VEC, x);
            load<VEC>(weight + u * VEC, w);
            load<VEC>(dx_row + u * VEC, dx);
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float xhat = (x[k] - m) * r;
                dx[k] += (w[k] * d[k] - md - xhat * mdx) * r;
            }
            store<VEC>(dx_row + u * VEC, dx);
        }
    }
    float* pw = partial_w + std::int64_t(blockIdx.x) * C;
    float* pb = LN ? partial_b + std::int64_t(blockIdx.x) * C : nullptr;
    for (int u = threadIdx.x; u < units; u += blockDim.x)
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            pw[u * VEC + k] = acc_w[k * units + u];
            if constexpr (LN) pb[u * VEC + k] = acc_b[k * units + u];
        }
}

template <class Kernel>
void allow_smem(Kernel kernel, std::size_t bytes, const char* op) {
    if (bytes > std::size_t(kMaxSmem))
        throw std::invalid_argument(std::string("cuda ") + op + ": C too large for one block's shared memory");
    if (bytes > 48 * 1024)
        FP8SCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <bool LN>
void norm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight, const float* bias,
                  std::int64_t N, int C, cudaStream_t stream) {
    if (N <= 0 || C <= 0) return;
    if (N > 0x7fffffff) throw std::invalid_argument("cuda norm forward: too many rows");
    const std::size_t smem = std::size_t(C) * sizeof(float);
    const bool packed = C % kPack == 0 && aligned16(out) && aligned16(inp) && aligned16(weight) &&
                        (!LN || aligned16(bias));
    if (packed) {
        allow_smem(norm_forward_kernel<kPack, LN>, smem, "norm forward");
        norm_forward_kernel<kPack, LN><<<unsigned(N), row_threads(C / kPack), smem, stream>>>(out, mean, rstd, inp,
                                                                                              weight, bias, C);
    } else {
        allow_smem(norm_forward_kernel<1, LN>, smem, "norm forward");
        norm_forward_kernel<1, LN><<<unsigned(N), row_threads(C), smem, stream>>>(out, mean, rstd, inp, weight,
                                                                                  bias, C);
    }
    FP8SCOPE_CUDA_LAUNCHED();
}

template <bool LN>
void norm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp, const float* weight,
                   const float* mean, const float* rstd, std::int64_t N, int C, Workspace ws, cudaStream_t stream) {
    if (C <= 0) return;
    if (N <= 0) {
        FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(dweight, 0, std::size_t(C) * sizeof(float), stream));
        if (LN) FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(dbias, 0, std::size_t(C) * sizeof(float), stream));
        return;
    }
    require_workspace(ws, norm_backward_workspace(N, C), "norm backward");
    const int P = partials(N);
    const std::int64_t R = rows_per_block(N);
    float* partial_w = static_cast<float*>(ws.ptr);
    float* partial_b = partial_w + std::int64_t(P) * C;
    const std::size_t smem = std::size_t(LN ? 2 : 1) * C * sizeof(float);
    const bool packed = C % kPack == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    if (packed) {
        allow_smem(norm_backward_kernel<kPack, LN>, smem, "norm backward");
        norm_backward_kernel<kPack, LN><<<unsigned(P), row_threads(C / kPack), smem, stream>>>(
            dinp, partial_w, partial_b, dout, inp, weight, mean, rstd, N, C, R);
    } else {
        allow_smem(norm_backward_kernel<1, LN>, smem, "norm backward");
        norm_backward_kernel<1, LN><<<unsigned(P), row_threads(C), smem, stream>>>(
            dinp, partial_w, partial_b, dout, inp, weight, mean, rstd, N, C, R);
    }
    FP8SCOPE_CUDA_LAUNCHED();
    sum_partials(dweight, partial_w, P, C, stream);
    if (LN) sum_partials(dbias, partial_b, P, C, stream);
}

}  // namespace

void layernorm_forward(bf16* out, float* mean, float* rstd, const bf16* inp, const float* weight, const float* bias,
                       std::int64_t N, int C, cudaStream_t stream) {
    if (!mean) return norm_forward<false>(out, nullptr, rstd, inp, weight, nullptr, N, C, stream);  // RMSNorm
    norm_forward<true>(out, mean, rstd, inp, weight, bias, N, C, stream);
}

void rmsnorm_forward(bf16* out, float* rstd, const bf16* inp, const float* weight, std::int64_t N, int C,
                     cudaStream_t stream) {
    norm_forward<false>(out, nullptr, rstd, inp, weight, nullptr, N, C, stream);
}

std::size_t norm_backward_workspace(std::int64_t N, int C) {
    return N > 0 && C > 0 ? 2 * std::size_t(partials(N)) * std::size_t(C) * sizeof(float) : 0;
}

void layernorm_backward(bf16* dinp, float* dweight, float* dbias, const bf16* dout, const bf16* inp,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N, int C, Workspace ws,
                        cudaStream_t stream) {
    if (!mean) return norm_backward<false>(dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, C, ws, stream);
    norm_backward<true>(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, ws, stream);
}

void rmsnorm_backward(bf16* dinp, float* dweight, const bf16* dout, const bf16* inp, const float* weight,
                      const float* rstd, std::int64_t N, int C, Workspace ws, cudaStream_t stream) {
    norm_backward<false>(dinp, dweight, nullptr, dout, inp, weight, nullptr, rstd, N, C, ws, stream);
}

}  // namespace fp8scope::cuda
