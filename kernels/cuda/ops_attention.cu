// Causal multi-head attention, llm.c style: the T x T score matrices are materialised and
// the four products are cuBLAS strided-batched GEMMs on tensor cores (BF16 in, float32
// accumulation), with a softmax kernel between them. qkv is read in place, with no
// permute: head h of batch row b is a (T,hs) matrix with row stride 3C at column h*hs, so
// one batched call covers the NH heads of one batch row (batch stride hs) and the B batch
// rows are a loop. The output and dqkv are written in place the same way.
//
// Numerics: scores and their gradients are float32 (the GEMM's output type), so the
// softmax and its backward see no BF16 rounding of logits; only the probabilities saved
// in `att` (what the CPU backend saves too) and dS, the operand of the dq/dk GEMMs, are
// BF16. The workspace holds one batch row at a time: (NH,T,T) float32 scores (or dP),
// plus (NH,T,T) BF16 dS in backward.
//
// Forward, per batch row b (column-major cuBLAS terms in comments, row-major in names):
//   S  (NH,T,T) = q k^T / sqrt(hs)       float32, full (the mask is the softmax's)
//   P  (NH,T,T) = softmax(S, causal)     BF16 into att, zero above the diagonal
//   out (T,C)   = P v                    BF16
// Backward:
//   dP = dout v^T (float32);  dv = P^T dout;  dS = P * (dP - rowsum(P * dP)) / sqrt(hs)
//   dq = dS k;  dk = dS^T q               (dqkv overwritten, as the CPU op)
// The GEMMs compute the masked upper triangle too (zeros in P and dS): simpler and what
// llm.c does; the work is 4 (forward) and 8 (backward) B*NH*T*T*hs FLOPs.
// Shapes: B batch, T time, C channels, NH heads, hs = C / NH.
#include <cublas_v2.h>

#include <cmath>
#include <mutex>
#include <unordered_map>

#include "cuda/ops_common.cuh"

namespace fp8scope::cuda {
namespace {

using namespace detail;

constexpr int kRowsPerBlock = 8;  // warps per block of the softmax kernels, one row each

// One cuBLAS handle per (host thread, device), created on first use and kept for the
// life of the process (destroying it at exit could outlive the CUDA context).
cublasHandle_t cublas_for(cudaStream_t stream) {
    thread_local std::unordered_map<int, cublasHandle_t> handles;
    int device = 0;
    FP8SCOPE_CUDA_CHECK(cudaGetDevice(&device));
    cublasHandle_t& h = handles[device];
    if (!h) FP8SCOPE_CUBLAS_CHECK(cublasCreate(&h));
    FP8SCOPE_CUBLAS_CHECK(cublasSetStream(h, stream));
    return h;
}

// C (m,n) = alpha op(A) op(B) + 0, column-major, `batch` times with the given strides.
void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
          long long sa, const void* B, int ldb, long long sb, void* C, cudaDataType_t ctype, int ldc, long long sc,
          int batch) {
    const float beta = 0.0f;
    FP8SCOPE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                     m, n, k, &alpha, A, CUDA_R_16BF, lda, sa, B, CUDA_R_16BF, ldb, sb,
                                                     &beta, C, ctype, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                                     CUBLAS_GEMM_DEFAULT));
}

// att rows (NH*T of one batch row) = softmax of the causal part of the score rows; a warp
// per row keeps an online (max, sum) per lane, combined by a butterfly (every lane gets
// the same bits: the combine is commutative).
__global__ void causal_softmax_kernel(bf16* att, const float* scores, int T, std::int64_t rows) {
    const std::int64_t row = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    const int t = int(row % T);
    const float* s = scores + row * T;
    bf16* p = att + row * T;
    float m = -INFINITY, sum = 0.0f;
    for (int j = lane; j <= t; j += 32) {
        const float x = s[j];
        if (x > m) {
            sum = sum * expf(m - x) + 1.0f;
            m = x;
        } else {
            sum += expf(x - m);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, sum, o);
        const float mx = fmaxf(m, m2);
        sum = mx == -INFINITY ? 0.0f : sum * expf(m - mx) + s2 * expf(m2 - mx);
        m = mx;
    }
    const float inv = 1.0f / sum;
    for (int j = lane; j < T; j += 32) p[j] = f32_to_bf16(j <= t ? expf(s[j] - m) * inv : 0.0f);
}

// dS rows = P * (dP - sum_j P dP) * scale on the causal part, 0 above it.
__global__ void causal_softmax_backward_kernel(bf16* ds, const bf16* att, const float* dp, int T, std::int64_t rows,
                                               float scale) {
    const std::int64_t row = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    const int t = int(row % T);
    const bf16* p = att + row * T;
    const float* g = dp + row * T;
    bf16* o = ds + row * T;
    float dot = 0.0f;
    for (int j = lane; j <= t; j += 32) dot += bf16_to_f32(p[j]) * g[j];
    dot = warp_sum(dot);
    for (int j = lane; j < T; j += 32) o[j] = f32_to_bf16(j <= t ? bf16_to_f32(p[j]) * (g[j] - dot) * scale : 0.0f);
}

void check_shape(int C, int NH, const char* op) {
    if (NH <= 0 || C % NH != 0)
        throw std::invalid_argument(std::string("cuda ") + op + ": C = " + std::to_string(C) +
                                    " is not a multiple of NH = " + std::to_string(NH));
}

// The float32 scores, rounded up to 256 bytes so that the BF16 dS behind them is aligned.
std::size_t scores_bytes(int T, int NH) { return (std::size_t(NH) * T * T * sizeof(float) + 255) / 256 * 256; }

}  // namespace

std::int64_t attention_saved(int B, int T, int NH) { return std::int64_t(B) * NH * T * T; }

std::size_t attention_workspace(int B, int T, int NH) {
    if (B <= 0 || T <= 0 || NH <= 0) return 0;
    return scores_bytes(T, NH) + std::size_t(NH) * T * T * sizeof(bf16);
}

void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int T, int C, int NH, Workspace ws,
                       cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(C, NH, "attention_forward");
    require_workspace(ws, attention_workspace(B, T, NH), "attention_forward");
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    const long long TT = std::int64_t(T) * T;
    const std::int64_t rows = std::int64_t(NH) * T;
    auto* scores = static_cast<float*>(ws.ptr);
    cublasHandle_t h = cublas_for(stream);
    for (int b = 0; b < B; ++b) {
        const bf16* q = qkv + std::int64_t(b) * T * C3;
        const bf16* k = q + C;
        const bf16* v = q + 2 * C;
        bf16* p = att + std::int64_t(b) * NH * TT;
        // S^T (T,T) col-major = K Q^T: element (t2, t) at t*T + t2, i.e. S[t][t2] row-major
        gemm(h, true, false, T, T, hs, scale, k, C3, hs, q, C3, hs, scores, CUDA_R_32F, T, TT, NH);
        causal_softmax_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(p, scores, T, rows);
        FP8SCOPE_CUDA_LAUNCHED();
        // out^T (hs,T) = V^T P^T: A = v (hs,T) ld 3C, B = P^T as stored (T,T) ld T
        gemm(h, false, false, hs, T, T, 1.0f, v, C3, hs, p, T, TT, out + std::int64_t(b) * T * C, CUDA_R_16BF, C, hs,
             NH);
    }
}

void attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* att, int B, int T, int C, int NH,
                        Workspace ws, cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(C, NH, "attention_backward");
    require_workspace(ws, attention_workspace(B, T, NH), "attention_backward");
    const int hs = C / NH, C3 = 3 * C;
    const float scale = 1.0f / std::sqrt(float(hs));
    const long long TT = std::int64_t(T) * T;
    const std::int64_t rows = std::int64_t(NH) * T;
    auto* dp = static_cast<float*>(ws.ptr);
    auto* ds = reinterpret_cast<bf16*>(static_cast<unsigned char*>(ws.ptr) + scores_bytes(T, NH));
    cublasHandle_t h = cublas_for(stream);
    for (int b = 0; b < B; ++b) {
        const bf16* q = qkv + std::int64_t(b) * T * C3;
        const bf16* k = q + C;
        const bf16* v = q + 2 * C;
        const bf16* p = att + std::int64_t(b) * NH * TT;
        const bf16* d = dout + std::int64_t(b) * T * C;
        bf16* dq = dqkv + std::int64_t(b) * T * C3;
        bf16* dk = dq + C;
        bf16* dv = dq + 2 * C;
        // dP^T (T,T) col-major = V dO^T: element (t2, t) = <dout[t], v[t2]>
        gemm(h, true, false, T, T, hs, 1.0f, v, C3, hs, d, C, hs, dp, CUDA_R_32F, T, TT, NH);
        // dv^T (hs,T) = dO^T P: A = dout (hs,T) ld C, B = P^T as stored, transposed
        gemm(h, false, true, hs, T, T, 1.0f, d, C, hs, p, T, TT, dv, CUDA_R_16BF, C3, hs, NH);
        causal_softmax_backward_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
            ds, p, dp, T, rows, scale);
        FP8SCOPE_CUDA_LAUNCHED();
        // dq^T (hs,T) = K^T dS^T: A = k (hs,T) ld 3C, B = dS^T as stored (T,T) ld T
        gemm(h, false, false, hs, T, T, 1.0f, k, C3, hs, ds, T, TT, dq, CUDA_R_16BF, C3, hs, NH);
        // dk^T (hs,T) = Q^T dS: B = dS^T as stored, transposed
        gemm(h, false, true, hs, T, T, 1.0f, q, C3, hs, ds, T, TT, dk, CUDA_R_16BF, C3, hs, NH);
    }
}

}  // namespace fp8scope::cuda
