// Rotary position embedding on the q and k heads of qkv (ops/ops.h): one thread per VEC
// pairs of a head of a row, reading the pair's two halves and their [cos, sin] entries.
// A pass over q and k (read and write once, BF16): on the 8 x 4096 Llama-style model under
// 1% of a step by its bytes, so it stays a kernel of its own in front of the flash kernels
// rather than a rotation inside their cp.async tile loads.
#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

template <int VEC>
__global__ void rope_kernel(bf16* qkv, const float* table, std::int64_t rows, int T, int heads, std::int64_t W,
                            int half, float sign) {
    const int units = half / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= rows * heads * units) return;
    const std::int64_t n = u / (std::int64_t(heads) * units);
    const int rest = int(u % (std::int64_t(heads) * units)), h = rest / units, i = (rest % units) * VEC;
    bf16* x1 = qkv + n * W + std::int64_t(h) * 2 * half + i;
    bf16* x2 = x1 + half;
    float a[VEC], b[VEC], cs[2 * VEC];
    load<VEC>(x1, a);
    load<VEC>(x2, b);
    load<2 * VEC>(table + ((n % T) * half + i) * 2, cs);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const float c = cs[2 * k], s = sign * cs[2 * k + 1];
        const float r1 = __fsub_rn(__fmul_rn(a[k], c), __fmul_rn(b[k], s));
        const float r2 = __fadd_rn(__fmul_rn(b[k], c), __fmul_rn(a[k], s));
        a[k] = r1, b[k] = r2;
    }
    store<VEC>(x1, a);
    store<VEC>(x2, b);
}

}  // namespace

void rope(bf16* qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse, cudaStream_t stream) {
    const std::int64_t rows = std::int64_t(B) * T;
    if (rows <= 0 || hs <= 0) return;
    if (hs % 2 != 0) throw std::invalid_argument("cuda rope: head size " + std::to_string(hs) + " is odd");
    const int half = hs / 2, heads = NH + NKV;
    const std::int64_t W = std::int64_t(NH + 2 * NKV) * hs;
    const float sign = inverse ? -1.0f : 1.0f;
    if (half % kPack == 0 && aligned16(qkv) && aligned16(table))
        rope_kernel<kPack><<<blocks_for(rows * heads * (half / kPack), 256), 256, 0, stream>>>(qkv, table, rows, T,
                                                                                              heads, W, half, sign);
    else
        rope_kernel<1><<<blocks_for(rows * heads * half, 256), 256, 0, stream>>>(qkv, table, rows, T, heads, W, half,
                                                                                 sign);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
