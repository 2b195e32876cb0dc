// MLP activations: GELU (tanh approximation), SwiGLU, the Smooth-SwiGLU channel scales and
// the column scaling that applies them. All are one memory pass, BF16 in 16-byte packs of
// 8 when aligned, float32 arithmetic rounded once on the store. Backward kernels
// overwrite (dinp = f'(x) * dout, as the CPU ops do) and may run in place on dout: each
// element is read before it is written by the same thread.
//
// smooth_swiglu_scales needs a column absmax over N rows. A max does not depend on the
// order of evaluation, so blocks combine with an integer atomicMax on the float bits
// (non-negative floats order as their bits): exact and deterministic, one pass. A block
// takes 512 rows and folds its 8 row lanes in shared memory first, so a column gets one
// atomic per 512 rows (one per thread and 8 rows made the atomics the whole cost).
// scale_columns multiplies or divides with the _rn intrinsics: bitwise the CPU's result.
// Shapes: n elements, N rows, H hidden width (the SwiGLU input is (N,2H) = [gate | up]).
#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr int kAbsmaxRows = 512;                // rows per block of the column absmax
constexpr int kAbsmaxLanes = 8;                 // its row lanes (blockDim.y)

struct GeluForward {
    __device__ float operator()(float x) const {
        const float u = kGeluC * (x + 0.044715f * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
};

struct GeluBackward {  // (x, dout) -> dinp
    __device__ float operator()(float x, float d) const {
        const float u = kGeluC * (x + 0.044715f * x * x * x);
        const float th = tanhf(u);
        const float sech2 = 1.0f - th * th;
        const float du = kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
        return (0.5f * (1.0f + th) + 0.5f * x * sech2 * du) * d;
    }
};

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// One thread per VEC channels of one row.
template <int VEC>
__global__ void swiglu_forward_kernel(bf16* out, const bf16* inp, std::int64_t N, int H) {
    const int units = H / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= N * units) return;
    const std::int64_t n = u / units;
    const int j = int(u % units) * VEC;
    const bf16* g = inp + n * 2 * H + j;
    float gv[VEC], uv[VEC], o[VEC];
    load<VEC>(g, gv);
    load<VEC>(g + H, uv);
#pragma unroll
    for (int k = 0; k < VEC; ++k) o[k] = gv[k] * sigmoid(gv[k]) * uv[k];
    store<VEC>(out + n * H + j, o);
}

template <int VEC>
__global__ void swiglu_backward_kernel(bf16* dinp, const bf16* inp, const bf16* dout, std::int64_t N, int H) {
    const int units = H / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= N * units) return;
    const std::int64_t n = u / units;
    const int j = int(u % units) * VEC;
    const bf16* g = inp + n * 2 * H + j;
    float gv[VEC], uv[VEC], d[VEC], dg[VEC], du[VEC];
    load<VEC>(g, gv);
    load<VEC>(g + H, uv);
    load<VEC>(dout + n * H + j, d);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const float sig = sigmoid(gv[k]);
        const float silu = gv[k] * sig;
        du[k] = d[k] * silu;
        dg[k] = d[k] * uv[k] * sig * (1.0f + gv[k] * (1.0f - sig));
    }
    bf16* o = dinp + n * 2 * H + j;
    store<VEC>(o, dg);
    store<VEC>(o + H, du);
}

// bits (H) = max(bits, float bits of max |h|) over the block's rows, NaN ignored.
template <int VEC>
__global__ void __launch_bounds__(32 * kAbsmaxLanes) column_absmax_kernel(unsigned* bits, const bf16* h,
                                                                          std::int64_t N, int H) {
    __shared__ float lanes[kAbsmaxLanes][VEC][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const std::int64_t col = (std::int64_t(blockIdx.y) * 32 + tx) * VEC;
    const std::int64_t r0 = std::int64_t(blockIdx.x) * kAbsmaxRows;
    const std::int64_t r1 = r0 + kAbsmaxRows < N ? r0 + kAbsmaxRows : N;
    float mx[VEC] = {};
    if (col < H) {
#pragma unroll 4
        for (std::int64_t r = r0 + ty; r < r1; r += kAbsmaxLanes) {
            float x[VEC];
            load<VEC>(h + r * H + col, x);
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const float a = fabsf(x[k]);
                if (a > mx[k]) mx[k] = a;  // false for NaN
            }
        }
    }
#pragma unroll
    for (int k = 0; k < VEC; ++k) lanes[ty][k][tx] = mx[k];
    __syncthreads();
    // Thread (tx, ty < VEC) folds the lanes of column col + ty.
    if (ty >= VEC || col + ty >= H) return;
    float m = 0.0f;
#pragma unroll
    for (int y = 0; y < kAbsmaxLanes; ++y) m = fmaxf(m, lanes[y][ty][tx]);
    if (m > 0.0f) atomicMax(bits + col + ty, __float_as_uint(m));
}

// scales (H), in place over the absmax bits.
__global__ void absmax_to_scale_kernel(float* scales, int H) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= H) return;
    const unsigned bits = reinterpret_cast<const unsigned*>(scales)[c];  // of max |h| >= 0
    float s = 1.0f;
    if (bits != 0 && bits < 0x7f800000u) {  // positive and finite
        // floor(log2 a) from the bits, subnormals included (m * 2^-149 for m < 2^23)
        const int biased = int(bits >> 23);
        const int log2a = biased ? biased - 127 : (31 - __clz(int(bits))) - 149;
        // clamped so the scale and its inverse stay normal float32 numbers
        const int e = min(max(-log2a, -126), 126);
        s = __uint_as_float(unsigned(e + 127) << 23);
    }
    scales[c] = s;
}

template <int VEC, class T>
__global__ void scale_columns_kernel(T* out, const T* in, const float* s, bool inverse, std::int64_t rows,
                                     std::int64_t cols) {
    const std::int64_t units = cols / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= rows * units) return;
    const std::int64_t r = u / units, c = (u % units) * VEC;
    float x[VEC], f[VEC];
    load<VEC>(in + r * cols + c, x);
    load<VEC>(s + c, f);
#pragma unroll
    for (int k = 0; k < VEC; ++k) x[k] = inverse ? __fdiv_rn(x[k], f[k]) : __fmul_rn(x[k], f[k]);
    store<VEC>(out + r * cols + c, x);
}

template <int PACK, class T>
void scale_columns_impl(T* out, const T* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols,
                        cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return;
    if (cols % PACK == 0 && aligned16(out) && aligned16(in) && aligned16(s))
        scale_columns_kernel<PACK><<<blocks_for(rows * (cols / PACK), 256), 256, 0, stream>>>(out, in, s, inverse,
                                                                                              rows, cols);
    else
        scale_columns_kernel<1><<<blocks_for(rows * cols, 256), 256, 0, stream>>>(out, in, s, inverse, rows, cols);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

void gelu_forward(bf16* out, const bf16* inp, std::int64_t n, cudaStream_t stream) {
    launch_unary(out, inp, n, GeluForward{}, stream);
}

void gelu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::int64_t n, cudaStream_t stream) {
    launch_binary(dinp, inp, dout, n, GeluBackward{}, stream);
}

void swiglu_forward(bf16* out, const bf16* inp, std::int64_t N, int H, cudaStream_t stream) {
    if (N <= 0 || H <= 0) return;
    if (H % kPack == 0 && aligned16(out) && aligned16(inp))
        swiglu_forward_kernel<kPack><<<blocks_for(N * (H / kPack), 256), 256, 0, stream>>>(out, inp, N, H);
    else
        swiglu_forward_kernel<1><<<blocks_for(N * H, 256), 256, 0, stream>>>(out, inp, N, H);
    FP8SCOPE_CUDA_LAUNCHED();
}

void swiglu_backward(bf16* dinp, const bf16* inp, const bf16* dout, std::int64_t N, int H, cudaStream_t stream) {
    if (N <= 0 || H <= 0) return;
    if (H % kPack == 0 && aligned16(dinp) && aligned16(inp) && aligned16(dout))
        swiglu_backward_kernel<kPack><<<blocks_for(N * (H / kPack), 256), 256, 0, stream>>>(dinp, inp, dout, N, H);
    else
        swiglu_backward_kernel<1><<<blocks_for(N * H, 256), 256, 0, stream>>>(dinp, inp, dout, N, H);
    FP8SCOPE_CUDA_LAUNCHED();
}

void smooth_swiglu_scales(float* scales, const bf16* h, std::int64_t N, int H, cudaStream_t stream) {
    if (H <= 0) return;
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(scales, 0, std::size_t(H) * sizeof(float), stream));
    unsigned* bits = reinterpret_cast<unsigned*>(scales);
    if (N > 0) {
        const dim3 block(32, kAbsmaxLanes);
        const unsigned row_blocks = blocks_for(N, kAbsmaxRows);
        if (H % kPack == 0 && aligned16(h))
            column_absmax_kernel<kPack><<<dim3(row_blocks, blocks_for(H / kPack, 32)), block, 0, stream>>>(bits, h,
                                                                                                          N, H);
        else
            column_absmax_kernel<1><<<dim3(row_blocks, blocks_for(H, 32)), block, 0, stream>>>(bits, h, N, H);
        FP8SCOPE_CUDA_LAUNCHED();
    }
    absmax_to_scale_kernel<<<blocks_for(H, 256), 256, 0, stream>>>(scales, H);
    FP8SCOPE_CUDA_LAUNCHED();
}

void scale_columns(bf16* out, const bf16* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
    scale_columns_impl<kPack>(out, in, s, inverse, rows, cols, stream);
}

void scale_columns(float* out, const float* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
    scale_columns_impl<4>(out, in, s, inverse, rows, cols, stream);
}

}  // namespace fp8scope::cuda
