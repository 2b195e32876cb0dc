// Token + position embedding (float32 tables, BF16 output) and its scatter-add backward.
//
// Backward must be deterministic, and a token repeats in a batch, so float atomics are
// out. Every output row gets one owner that adds its contributions in increasing position
// order, the order of the CPU op, so dwte and dwpe equal the CPU's bit for bit:
// - dwpe[t]: the thread for (t, channels) adds dout[b,t] for b = 0..B-1.
// - dwte[v]: the positions are sorted by token with a stable radix sort (CUB; equal
//   tokens keep their position order); the first position of each run of equal tokens
//   owns dwte[token] and walks the run. The work per owner follows the token's count,
//   which is small next to a GEMM even for the most frequent tokens.
// Shapes: B batch, T time, C channels, N = B*T positions, V vocabulary, maxT >= T.
#include <cub/device/device_radix_sort.cuh>

#include "cuda/ops/common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

constexpr int kRowThreads = 128;  // threads of a dwte owner block, VEC channels each

// out (N,C) = wte[tokens[n]] + wpe[n % T] (wte alone when wpe is null): thread per VEC
// channels of a row.
template <int VEC>
__global__ void embedding_forward_kernel(bf16* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                                         std::int64_t N, int T, int C) {
    const int units = C / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= N * units) return;
    const std::int64_t n = u / units;
    const int c = int(u % units) * VEC;
    float e[VEC], p[VEC];
    load<VEC>(wte + std::int64_t(tokens[n]) * C + c, e);
    if (wpe) {
        load<VEC>(wpe + (n % T) * C + c, p);
#pragma unroll
        for (int k = 0; k < VEC; ++k) e[k] = __fadd_rn(e[k], p[k]);
    }
    store<VEC>(out + n * C + c, e);
}

// dwpe (T,C) += sum over b of dout[b,t]: thread per VEC channels of a position t.
template <int VEC>
__global__ void dwpe_kernel(float* dwpe, const bf16* dout, int B, int T, int C) {
    const int units = C / VEC;
    const std::int64_t u = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (u >= std::int64_t(T) * units) return;
    const std::int64_t t = u / units;
    const int c = int(u % units) * VEC;
    float acc[VEC];
    load<VEC>(dwpe + t * C + c, acc);
    for (int b = 0; b < B; ++b) {
        float d[VEC];
        load<VEC>(dout + (std::int64_t(b) * T + t) * C + c, d);
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] = __fadd_rn(acc[k], d[k]);
    }
    store<VEC>(dwpe + t * C + c, acc);
}

__global__ void iota_kernel(std::int32_t* v, std::int64_t N) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < N) v[i] = std::int32_t(i);
}

// dwte[token] += dout rows of the run of equal tokens starting at sorted position
// blockIdx.x (other blocks return); blockIdx.y picks a channel range.
template <int VEC>
__global__ void dwte_kernel(float* dwte, const bf16* dout, const std::int32_t* keys, const std::int32_t* rows,
                            std::int64_t N, int C) {
    const std::int64_t i = blockIdx.x;
    const std::int32_t token = keys[i];
    if (i > 0 && keys[i - 1] == token) return;
    const int c = (blockIdx.y * blockDim.x + threadIdx.x) * VEC;
    if (c >= C) return;
    float acc[VEC];
    float* dst = dwte + std::int64_t(token) * C + c;
    load<VEC>(dst, acc);
    for (std::int64_t j = i; j < N && keys[j] == token; ++j) {
        float d[VEC];
        load<VEC>(dout + std::int64_t(rows[j]) * C + c, d);
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] = __fadd_rn(acc[k], d[k]);
    }
    store<VEC>(dst, acc);
}

// The workspace: sorted keys, positions in, positions out (N int32 each, 256-byte aligned),
// then CUB's temporary storage.
std::size_t align256(std::size_t b) { return (b + 255) / 256 * 256; }

std::size_t cub_temp_bytes(int N) {
    std::size_t bytes = 0;
    FP8SCOPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, static_cast<const std::int32_t*>(nullptr),
                                                        static_cast<std::int32_t*>(nullptr),
                                                        static_cast<const std::int32_t*>(nullptr),
                                                        static_cast<std::int32_t*>(nullptr), N));
    return bytes;
}

}  // namespace

void embedding_forward(bf16* out, const std::int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C,
                       cudaStream_t stream) {
    const std::int64_t N = std::int64_t(B) * T;
    if (N <= 0 || C <= 0) return;
    if (C % kPack == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe))
        embedding_forward_kernel<kPack><<<blocks_for(N * (C / kPack), 256), 256, 0, stream>>>(out, tokens, wte, wpe, N,
                                                                                              T, C);
    else
        embedding_forward_kernel<1><<<blocks_for(N * C, 256), 256, 0, stream>>>(out, tokens, wte, wpe, N, T, C);
    FP8SCOPE_CUDA_LAUNCHED();
}

std::size_t embedding_backward_workspace(int B, int T) {
    const std::int64_t N = std::int64_t(B) * T;
    if (N <= 0) return 0;
    return 3 * align256(std::size_t(N) * sizeof(std::int32_t)) + cub_temp_bytes(int(N));
}

void embedding_backward(float* dwte, float* dwpe, const bf16* dout, const std::int32_t* tokens, int B, int T, int C,
                        Workspace ws, cudaStream_t stream) {
    const std::int64_t N = std::int64_t(B) * T;
    if (N <= 0 || C <= 0) return;
    if (N > 0x7fffffff) throw std::invalid_argument("cuda embedding_backward: too many positions");
    const bool packed = C % kPack == 0 && aligned16(dout) && aligned16(dwte) && aligned16(dwpe);

    if (dwpe) {
        if (packed)
            dwpe_kernel<kPack><<<blocks_for(std::int64_t(T) * (C / kPack), 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
        else
            dwpe_kernel<1><<<blocks_for(std::int64_t(T) * C, 256), 256, 0, stream>>>(dwpe, dout, B, T, C);
        FP8SCOPE_CUDA_LAUNCHED();
    }

    const std::size_t need = embedding_backward_workspace(B, T);
    require_workspace(ws, need, "embedding_backward");
    const std::size_t array = align256(std::size_t(N) * sizeof(std::int32_t));
    auto* base = static_cast<unsigned char*>(ws.ptr);
    auto* keys = reinterpret_cast<std::int32_t*>(base);
    auto* rows_in = reinterpret_cast<std::int32_t*>(base + array);
    auto* rows = reinterpret_cast<std::int32_t*>(base + 2 * array);
    void* temp = base + 3 * array;
    std::size_t temp_bytes = need - 3 * array;

    iota_kernel<<<blocks_for(N, 256), 256, 0, stream>>>(rows_in, N);
    FP8SCOPE_CUDA_LAUNCHED();
    // A stable sort by token: runs of a token keep increasing positions.
    FP8SCOPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, tokens, keys, rows_in, rows, int(N), 0,
                                                        int(sizeof(std::int32_t) * 8), stream));
    const int units = packed ? C / kPack : C;
    const dim3 grid(unsigned(N), blocks_for(units, kRowThreads));
    if (packed)
        dwte_kernel<kPack><<<grid, kRowThreads, 0, stream>>>(dwte, dout, keys, rows, N, C);
    else
        dwte_kernel<1><<<grid, kRowThreads, 0, stream>>>(dwte, dout, keys, rows, N, C);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
