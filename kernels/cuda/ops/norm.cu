// LayerNorm and RMSNorm over the last dimension C of N rows (BF16 in and out, float32
// weight, bias and statistics). One kernel template serves both (LN = false drops the
// mean and the bias). Statistics in float32: the mean, then the sum of squared deviations
// (two-pass variance, no cancellation), each a fixed-tree block sum.
//
// Register path (C a multiple of 8 up to 8192, 16-byte aligned pointers): a block of up to
// 256 threads takes a row, thread t holding its U <= 4 packs of 8 values (packs t, t + T,
// ...) in registers between the passes, with its channels' weight (and bias or gradient
// sums) in registers for all the block's rows. A block issues the loads of its next row
// before reducing the current one, so they are in flight during its barriers and stores,
// and has the rows after it prefetched into L2 (one bulk prefetch per row and tensor);
// each block sum takes one barrier (consecutive sums alternate between two scratch slots).
// Forward launches as many blocks as fit on the device, block b taking rows b, b + grid, ...
// (a row's result does not depend on its block); backward keeps the row ranges below.
//
// Generic path (any other C or alignment): forward takes one block per row with the row in
// shared memory; backward re-reads the row from memory for its second pass.
//
// Backward adds into dinp (the residual stream's gradient collects several contributions,
// as on the CPU) and overwrites dweight, dbias. Those are column sums over rows; to stay
// deterministic without float atomics, each block owns a fixed range of rows (the range
// depends only on N), every thread owns fixed channels and accumulates their sums over
// its rows in order, the block writes one partial row (P,C), and a second pass sums the
// P partials of each channel in order.
// Shapes: N rows, C channels, P row blocks of backward.
#include <algorithm>
#include <type_traits>

#include "cpu/ops/norm.h"
#include "cuda/ops/common.cuh"

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

// --- register path ----------------------------------------------------------------------

constexpr int kRowThreads = 256;  // most threads of a block
constexpr int kMaxUnits = 4;      // most packs of a row per thread (C <= 8192)
// Backward holds its next row in registers and has the rows up to kAhead after the current
// one prefetched into L2: the registers alone leave one row in flight, too few to keep
// the memory busy with 2 blocks an SM.
constexpr int kAhead = 3;

// Packs per thread for rows of C channels; 0 where the register path does not apply.
int row_units(int C) {
    const int u = (C / kPack + kRowThreads - 1) / kRowThreads;
    return C % kPack == 0 && u <= kMaxUnits ? u : 0;
}
int unit_threads(int C, int U) { return round_up((C / kPack + U - 1) / U, 32); }

// f(std::integral_constant<int, U>) for the U the kernels are instantiated for.
template <class F>
void with_units(int U, F&& f) {
    switch (U) {
    case 1: return f(std::integral_constant<int, 1>());
    case 2: return f(std::integral_constant<int, 2>());
    case 3: return f(std::integral_constant<int, 3>());
    default: return f(std::integral_constant<int, 4>());
    }
}

// p[j] = pack t + j*T of a row (T = blockDim.x) while it exists (zero past the row's end).
template <int U>
__device__ __forceinline__ void load_row(uint4 (&p)[U], const bf16* row, int units) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
        const int u = threadIdx.x + j * blockDim.x;
        p[j] = u < units ? reinterpret_cast<const uint4*>(row)[u] : make_uint4(0, 0, 0, 0);
    }
}

// f(v) for every value of the thread's packs of a row, in order.
template <int U, class F>
__device__ __forceinline__ void for_each_value(const uint4 (&x)[U], int units, F&& f) {
#pragma unroll
    for (int j = 0; j < U; ++j) {
        if (int(threadIdx.x) + j * int(blockDim.x) >= units) continue;
        float v[kPack];
        unpack(x[j], v);
#pragma unroll
        for (int k = 0; k < kPack; ++k) f(v[k]);
    }
}

// v[0..K) = their sums over the block (fixed tree, every thread gets them) with one barrier:
// consecutive calls must alternate between two slots of 32*K floats, so that a slot is
// rewritten only after the next call's barrier, which every thread passes after its reads.
template <int K>
__device__ __forceinline__ void block_sums(float (&v)[K], float* slot) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = warp_sum(v[k]);
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < K; ++k) slot[k * 32 + warp] = v[k];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = warp_sum(lane < warps ? slot[k * 32 + lane] : 0.0f);
}

// Rows blockIdx.x, + gridDim.x, ... (gridDim.x <= N < 2^31).
template <int U, bool LN>
__global__ void __launch_bounds__(kRowThreads) norm_forward_rows_kernel(bf16* out, float* mean, float* rstd,
                                                                        const bf16* inp, const float* weight,
                                                                        const float* bias, int N, int C) {
    __shared__ float slots[2][32];
    const int units = C / kPack;
    float w[U][kPack], b[U][kPack];
#pragma unroll
    for (int j = 0; j < U; ++j) {
        const int u = threadIdx.x + j * blockDim.x;
        if (u < units) {
            load<kPack>(weight + u * kPack, w[j]);
            if constexpr (LN) load<kPack>(bias + u * kPack, b[j]);
        }
    }
    int slot = 0;
    uint4 x[U];
    load_row(x, inp + std::int64_t(blockIdx.x) * C, units);
    for (int n = blockIdx.x;; n += gridDim.x) {
        const bool more = N - n > int(gridDim.x);
        uint4 next[U];
        if (more) load_row(next, inp + std::int64_t(n + gridDim.x) * C, units);  // in flight during this row
        if (threadIdx.x == 0 && std::int64_t(N) - n > 2 * std::int64_t(gridDim.x))  // the row after next
            prefetch_l2(inp + (n + 2 * std::int64_t(gridDim.x)) * C, std::uint32_t(C) * sizeof(bf16));

        float m = 0.0f;
        if constexpr (LN) {
            float s[1] = {0.0f};
            for_each_value(x, units, [&](float v) { s[0] += v; });
            block_sums(s, slots[slot]);
            slot ^= 1;
            m = s[0] / float(C);
        }
        float sq[1] = {0.0f};
        for_each_value(x, units, [&](float v) { sq[0] += (v - m) * (v - m); });
        block_sums(sq, slots[slot]);
        slot ^= 1;
        const float r = 1.0f / sqrtf(sq[0] / float(C) + ops::kNormEps);

        bf16* o = out + std::int64_t(n) * C;
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const int u = threadIdx.x + j * blockDim.x;
            if (u >= units) continue;
            float v[kPack], y[kPack];
            unpack(x[j], v);
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                y[k] = (v[k] - m) * r * w[j][k];
                if constexpr (LN) y[k] += b[j][k];
            }
            store<kPack>(o + u * kPack, y);
        }
        if (threadIdx.x == 0) {
            if constexpr (LN) mean[n] = m;
            rstd[n] = r;
        }
        if (!more) break;
#pragma unroll
        for (int j = 0; j < U; ++j) x[j] = next[j];
    }
}

// As norm_backward_kernel (same rows per block, same partials), the rows in registers.
template <int U, bool LN>
__global__ void __launch_bounds__(kRowThreads)
    norm_backward_rows_kernel(bf16* dinp, float* partial_w, float* partial_b, const bf16* dout, const bf16* inp,
                              const float* weight, const float* mean, const float* rstd, std::int64_t N, int C,
                              std::int64_t R) {
    __shared__ float slots[2][2 * 32];
    const int units = C / kPack;
    float w[U][kPack], acc_w[U][kPack], acc_b[U][kPack];
#pragma unroll
    for (int j = 0; j < U; ++j) {
        const int u = threadIdx.x + j * blockDim.x;
        if (u < units) load<kPack>(weight + u * kPack, w[j]);
#pragma unroll
        for (int k = 0; k < kPack; ++k) acc_w[j][k] = acc_b[j][k] = 0.0f;
    }

    const std::int64_t r0 = std::int64_t(blockIdx.x) * R;
    const std::int64_t r1 = r0 + R < N ? r0 + R : N;
    auto prefetch_rows = [&](std::int64_t a) {
        const std::uint32_t bytes = std::uint32_t(C) * sizeof(bf16);
        prefetch_l2(dout + a * C, bytes);
        prefetch_l2(inp + a * C, bytes);
        prefetch_l2(dinp + a * C, bytes);
    };
    uint4 d[U], x[U], g[U];  // row n of dout, inp, dinp
    load_row(d, dout + r0 * C, units);
    load_row(x, inp + r0 * C, units);
    load_row(g, dinp + r0 * C, units);
    float m = LN ? mean[r0] : 0.0f, r = rstd[r0];
    if (threadIdx.x == 0)
        for (std::int64_t a = r0 + 2; a < r0 + kAhead && a < r1; ++a) prefetch_rows(a);
    for (std::int64_t n = r0; n < r1; ++n) {
        uint4 dn[U], xn[U], gn[U];  // row n + 1, in flight during this row
        if (threadIdx.x == 0 && n + kAhead < r1) prefetch_rows(n + kAhead);
        float mn = 0.0f, rn = 0.0f;
        if (n + 1 < r1) {
            load_row(dn, dout + (n + 1) * C, units);
            load_row(xn, inp + (n + 1) * C, units);
            load_row(gn, dinp + (n + 1) * C, units);
            if constexpr (LN) mn = mean[n + 1];
            rn = rstd[n + 1];
        }
        // dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = w * dout
        float s[2] = {0.0f, 0.0f};
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const int u = threadIdx.x + j * blockDim.x;
            if (u >= units) continue;
            float dv[kPack], xv[kPack];
            unpack(d[j], dv);
            unpack(x[j], xv);
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                const float xhat = (xv[k] - m) * r;
                const float dxhat = w[j][k] * dv[k];
                s[0] += dxhat;
                s[1] += dxhat * xhat;
                acc_w[j][k] += dv[k] * xhat;
                if constexpr (LN) acc_b[j][k] += dv[k];
            }
        }
        block_sums(s, slots[(n - r0) & 1]);
        const float md = LN ? s[0] / float(C) : 0.0f, mdx = s[1] / float(C);
        bf16* dx_row = dinp + n * C;
#pragma unroll
        for (int j = 0; j < U; ++j) {
            const int u = threadIdx.x + j * blockDim.x;
            if (u >= units) continue;
            float dv[kPack], xv[kPack], dx[kPack];
            unpack(d[j], dv);
            unpack(x[j], xv);
            unpack(g[j], dx);
#pragma unroll
            for (int k = 0; k < kPack; ++k) {
                const float xhat = (xv[k] - m) * r;
                dx[k] += (w[j][k] * dv[k] - md - xhat * mdx) * r;
            }
            store<kPack>(dx_row + u * kPack, dx);
        }
#pragma unroll
        for (int j = 0; j < U; ++j) d[j] = dn[j], x[j] = xn[j], g[j] = gn[j];
        m = mn, r = rn;
    }
    float* pw = partial_w + std::int64_t(blockIdx.x) * C;
    float* pb = LN ? partial_b + std::int64_t(blockIdx.x) * C : nullptr;
#pragma unroll
    for (int j = 0; j < U; ++j) {
        const int u = threadIdx.x + j * blockDim.x;
        if (u >= units) continue;
#pragma unroll
        for (int k = 0; k < kPack; ++k) {
            pw[u * kPack + k] = acc_w[j][k];
            if constexpr (LN) pb[u * kPack + k] = acc_b[j][k];
        }
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
    if (packed && row_units(C)) {
        with_units(row_units(C), [&](auto units) {
            const auto kernel = norm_forward_rows_kernel<decltype(units)::value, LN>;
            const int threads = unit_threads(C, units);
            int device = 0, sms = 0, per_sm = 0;
            FP8SCOPE_CUDA_CHECK(cudaGetDevice(&device));
            FP8SCOPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
            FP8SCOPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0));
            const std::int64_t grid = std::min<std::int64_t>(N, std::int64_t(sms) * std::max(1, per_sm));
            kernel<<<unsigned(grid), threads, 0, stream>>>(out, mean, rstd, inp, weight, bias, int(N), C);
        });
    } else if (packed) {
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
    if (packed && row_units(C)) {
        with_units(row_units(C), [&](auto units) {
            norm_backward_rows_kernel<decltype(units)::value, LN><<<unsigned(P), unit_threads(C, units), 0, stream>>>(
                dinp, partial_w, partial_b, dout, inp, weight, mean, rstd, N, C, R);
        });
    } else if (packed) {
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
