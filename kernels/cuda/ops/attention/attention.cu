// Causal multi-head attention: the entry points of ops/ops.h. Two paths:
//   fused (head sizes 64 and 128, 16-byte aligned pointers): FlashAttention-2 style
//     kernels (flash.cuh) that never hold a T x T matrix in memory;
//   cuBLAS (every other shape, llm.c style): the T x T scores of a few heads at a time are
//     materialised in the workspace and the products are strided-batched GEMMs on tensor
//     cores (BF16 in, float32 accumulation), with softmax kernels between them.
// Both save the same state, the row logsumexp L (B,NH,T) in float32 (ops/ops.h), so the saved
// `att` is O(T) per row; the cuBLAS backward recomputes the scores from q, k and L.
//
// cuBLAS path, per batch row b and chunk of heads (column-major cuBLAS terms in comments,
// row-major in names). qkv is read in place: head h of batch row b is a (T,hs) matrix with
// row stride W = C + 2 NKV hs at column h*hs, so one batched call covers the heads of a
// chunk (batch stride hs). Under grouped-query attention a chunk stays within the query
// heads of one key/value head, whose k and v every call of the batch reads (batch stride
// 0), and dk, dv of the group are summed in float32 head by head (GEMMs with beta = 1 in
// the workspace), then rounded to BF16 once. Scores and their gradients are float32 (the
// GEMM's output type); the probabilities P and dS, the operands of the following GEMMs, are BF16.
//   forward:  S = q k^T / sqrt(hs) (float32);  P = softmax(S, causal) (BF16), L = lse(S);
//             out = P v
//   backward: S again;  P = exp(S - L) (BF16, 0 above the diagonal);  dv = P^T dout;
//             dP = dout v^T (float32);  dS = P (dP - rowsum(P dP)) / sqrt(hs) (BF16, over P);
//             dq = dS k;  dk = dS^T q   (dqkv overwritten)
// The GEMMs compute the masked upper triangle too (zeros in P and dS).
// Shapes: B batch, T time, C channels, NH heads, NKV key/value heads, hs = C / NH.
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <unordered_map>

#include "cuda/ops/attention/internal.h"
#include "cuda/ops/common.cuh"

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

// C (m,n) = alpha op(A) op(B) + beta C, column-major, `batch` times with the given strides.
void gemm(cublasHandle_t h, bool ta, bool tb, int m, int n, int k, float alpha, const void* A, int lda,
          long long sa, const void* B, int ldb, long long sb, void* C, cudaDataType_t ctype, int ldc, long long sc,
          int batch, float beta = 0.0f) {
    FP8SCOPE_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                     m, n, k, &alpha, A, CUDA_R_16BF, lda, sa, B, CUDA_R_16BF, ldb, sb,
                                                     &beta, C, ctype, ldc, sc, batch, CUBLAS_COMPUTE_32F,
                                                     CUBLAS_GEMM_DEFAULT));
}

// P rows (heads*T of one batch row) = softmax of the causal part of the score rows, and
// lse[row] = max + ln(sum). A warp per row keeps an online (max, sum) per lane, combined
// by a butterfly (every lane gets the same bits: the combine is commutative).
__global__ void causal_softmax_kernel(bf16* probs, float* lse, const float* scores, int T, std::int64_t rows) {
    const std::int64_t row = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    const int t = int(row % T);
    const float* s = scores + row * T;
    bf16* p = probs + row * T;
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
    if (lane == 0) lse[row] = m + logf(sum);
}

// P rows = exp(S - lse) on the causal part, 0 above it (backward's recomputation).
__global__ void causal_probs_kernel(bf16* probs, const float* scores, const float* lse, int T, std::int64_t rows) {
    const std::int64_t row = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    const int t = int(row % T);
    const float* s = scores + row * T;
    const float L = lse[row];
    bf16* p = probs + row * T;
    for (int j = lane; j < T; j += 32) p[j] = f32_to_bf16(j <= t ? expf(s[j] - L) : 0.0f);
}

// dS rows = P * (dP - sum_j P dP) * scale on the causal part, 0 above it; ds may be p.
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
    dot = warp_sum(dot);  // every lane has read its p[j] before any lane writes o[j]
    for (int j = lane; j < T; j += 32) o[j] = f32_to_bf16(j <= t ? bf16_to_f32(p[j]) * (g[j] - dot) * scale : 0.0f);
}

// dst (T rows of stride W, hs columns) = acc (T,hs) float32 rounded to BF16: a key/value
// head's gradient summed over its query heads.
__global__ void store_group_grad_kernel(bf16* dst, const float* acc, int T, int hs, std::int64_t W) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= std::int64_t(T) * hs) return;
    dst[(i / hs) * W + i % hs] = f32_to_bf16(acc[i]);
}

void check_shape(int C, int NH, int NKV, const char* op) {
    if (NH <= 0 || C % NH != 0)
        throw std::invalid_argument(std::string("cuda ") + op + ": C = " + std::to_string(C) +
                                    " is not a multiple of NH = " + std::to_string(NH));
    if (NKV <= 0 || NH % NKV != 0)
        throw std::invalid_argument(std::string("cuda ") + op + ": NKV = " + std::to_string(NKV) +
                                    " does not divide NH = " + std::to_string(NH));
}

std::size_t round256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// The logsumexp inside att: its first 4-byte aligned address.
float* lse_of(const bf16* att) {
    const auto p = (reinterpret_cast<std::uintptr_t>(att) + 3) & ~std::uintptr_t(3);
    return reinterpret_cast<float*>(p);
}

// --- the cuBLAS path ---------------------------------------------------------------------------

// Workspace of `heads` heads of one batch row: float32 scores, then BF16 probabilities.
std::size_t cublas_bytes(int T, int heads) {
    return round256(std::size_t(heads) * T * T * sizeof(float)) + std::size_t(heads) * T * T * sizeof(bf16);
}

// The heads per chunk that fit in ws (at least 1, else the workspace is refused); under
// grouped-query attention (group > 1 query heads per key/value head) a divisor of group,
// so that a chunk never straddles two groups.
int cublas_heads(const Workspace& ws, int T, int NH, int group, const char* op) {
    require_workspace(ws, cublas_bytes(T, 1), op);
    int heads = group > 1 ? group : NH;
    while (heads > 1 && cublas_bytes(T, heads) > ws.bytes) heads = std::max(1, std::min(heads - 1, heads / 2));
    while (group > 1 && group % heads != 0) --heads;
    return heads;
}

// Backward's float32 sums of dk and dv of one key/value head under grouped-query
// attention, in front of the chunk buffers: (T,hs) each.
std::size_t group_acc_bytes(int T, int hs, int group) {
    return group > 1 ? round256(2 * std::size_t(T) * hs * sizeof(float)) : 0;
}

struct Chunk {
    float* scores;
    bf16* probs;
};

Chunk chunk_buffers(const Workspace& ws, int T, int heads) {
    auto* scores = static_cast<float*>(ws.ptr);
    auto* probs = reinterpret_cast<bf16*>(static_cast<unsigned char*>(ws.ptr) +
                                          round256(std::size_t(heads) * T * T * sizeof(float)));
    return {scores, probs};
}

// k and v of the chunk starting at query head h0 of batch row b, and their batch stride.
struct KvOf {
    const bf16* k;
    const bf16* v;
    long long stride;
};
KvOf kv_of(const bf16* qkv_b, int C, int NKV, int hs, int group, int h0) {
    const bf16* k = qkv_b + C + std::int64_t(h0 / group) * hs;
    return {k, k + std::int64_t(NKV) * hs, group > 1 ? 0 : hs};
}

void cublas_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int NKV, Workspace ws,
                    cudaStream_t stream) {
    const int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs;
    const float scale = 1.0f / std::sqrt(float(hs));
    const long long TT = std::int64_t(T) * T;
    const int chunk = cublas_heads(ws, T, NH, group, "attention_forward");
    const Chunk buf = chunk_buffers(ws, T, chunk);
    cublasHandle_t h = cublas_for(stream);
    for (int b = 0; b < B; ++b)
        for (int h0 = 0; h0 < NH; h0 += chunk) {
            const int nh = std::min(chunk, NH - h0);
            const std::int64_t rows = std::int64_t(nh) * T;
            const bf16* qkv_b = qkv + std::int64_t(b) * T * W;
            const bf16* q = qkv_b + std::int64_t(h0) * hs;
            const KvOf kv = kv_of(qkv_b, C, NKV, hs, group, h0);
            // S^T (T,T) col-major = K Q^T: element (t2, t) at t*T + t2, i.e. S[t][t2] row-major
            gemm(h, true, false, T, T, hs, scale, kv.k, W, kv.stride, q, W, hs, buf.scores, CUDA_R_32F, T, TT, nh);
            causal_softmax_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
                buf.probs, lse + (std::int64_t(b) * NH + h0) * T, buf.scores, T, rows);
            FP8SCOPE_CUDA_LAUNCHED();
            // out^T (hs,T) = V^T P^T: A = v (hs,T) ld W, B = P^T as stored (T,T) ld T
            gemm(h, false, false, hs, T, T, 1.0f, kv.v, W, kv.stride, buf.probs, T, TT,
                 out + std::int64_t(b) * T * C + std::int64_t(h0) * hs, CUDA_R_16BF, C, hs, nh);
        }
}

void cublas_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, int B, int T, int C, int NH,
                     int NKV, Workspace ws, cudaStream_t stream) {
    const int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs;
    const float scale = 1.0f / std::sqrt(float(hs));
    const long long TT = std::int64_t(T) * T;
    // Grouped-query attention: dk and dv of the group summed in float32 in front of the chunks.
    const std::size_t acc_bytes = group_acc_bytes(T, hs, group);
    require_workspace(ws, acc_bytes + cublas_bytes(T, 1), "attention_backward");
    float* dk_acc = static_cast<float*>(ws.ptr);
    float* dv_acc = dk_acc + std::int64_t(T) * hs;
    const Workspace rest{static_cast<unsigned char*>(ws.ptr) + acc_bytes, ws.bytes - acc_bytes};
    const int chunk = cublas_heads(rest, T, NH, group, "attention_backward");
    const Chunk buf = chunk_buffers(rest, T, chunk);
    cublasHandle_t h = cublas_for(stream);
    for (int b = 0; b < B; ++b)
        for (int h0 = 0; h0 < NH; h0 += chunk) {
            const int nh = std::min(chunk, NH - h0);
            const std::int64_t rows = std::int64_t(nh) * T;
            const std::int64_t col = std::int64_t(h0) * hs;
            const bf16* qkv_b = qkv + std::int64_t(b) * T * W;
            const bf16* q = qkv_b + col;
            const KvOf kv = kv_of(qkv_b, C, NKV, hs, group, h0);
            const bf16* d = dout + std::int64_t(b) * T * C + col;
            bf16* dqkv_b = dqkv + std::int64_t(b) * T * W;
            bf16* dq = dqkv_b + col;
            bf16* dk = dqkv_b + C + std::int64_t(h0 / group) * hs;
            bf16* dv = dk + std::int64_t(NKV) * hs;
            gemm(h, true, false, T, T, hs, scale, kv.k, W, kv.stride, q, W, hs, buf.scores, CUDA_R_32F, T, TT, nh);
            causal_probs_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
                buf.probs, buf.scores, lse + (std::int64_t(b) * NH + h0) * T, T, rows);
            FP8SCOPE_CUDA_LAUNCHED();
            // dv^T (hs,T) = dO^T P: A = dout (hs,T) ld C, B = P^T as stored, transposed
            if (group == 1) {
                gemm(h, false, true, hs, T, T, 1.0f, d, C, hs, buf.probs, T, TT, dv, CUDA_R_16BF, W, hs, nh);
            } else {
                for (int i = 0; i < nh; ++i)  // head by head into the group's float32 sum
                    gemm(h, false, true, hs, T, T, 1.0f, d + i * hs, C, 0, buf.probs + i * TT, T, 0, dv_acc,
                         CUDA_R_32F, hs, 0, 1, (h0 + i) % group == 0 ? 0.0f : 1.0f);
            }
            // dP^T (T,T) col-major = V dO^T: element (t2, t) = <dout[t], v[t2]> (over the scores)
            gemm(h, true, false, T, T, hs, 1.0f, kv.v, W, kv.stride, d, C, hs, buf.scores, CUDA_R_32F, T, TT, nh);
            causal_softmax_backward_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
                buf.probs, buf.probs, buf.scores, T, rows, scale);
            FP8SCOPE_CUDA_LAUNCHED();
            // dq^T (hs,T) = K^T dS^T: A = k (hs,T) ld W, B = dS^T as stored (T,T) ld T
            gemm(h, false, false, hs, T, T, 1.0f, kv.k, W, kv.stride, buf.probs, T, TT, dq, CUDA_R_16BF, W, hs, nh);
            // dk^T (hs,T) = Q^T dS: B = dS^T as stored, transposed
            if (group == 1) {
                gemm(h, false, true, hs, T, T, 1.0f, q, W, hs, buf.probs, T, TT, dk, CUDA_R_16BF, W, hs, nh);
                continue;
            }
            for (int i = 0; i < nh; ++i)
                gemm(h, false, true, hs, T, T, 1.0f, q + i * hs, W, 0, buf.probs + i * TT, T, 0, dk_acc, CUDA_R_32F,
                     hs, 0, 1, (h0 + i) % group == 0 ? 0.0f : 1.0f);
            if ((h0 + nh) % group == 0) {  // the group's last query head: its sums are complete
                const unsigned blocks = blocks_for(std::int64_t(T) * hs, 256);
                store_group_grad_kernel<<<blocks, 256, 0, stream>>>(dk, dk_acc, T, hs, W);
                FP8SCOPE_CUDA_LAUNCHED();
                store_group_grad_kernel<<<blocks, 256, 0, stream>>>(dv, dv_acc, T, hs, W);
                FP8SCOPE_CUDA_LAUNCHED();
            }
        }
}

// --- the fused path ------------------------------------------------------------------------------

bool fused(int hs, std::initializer_list<const void*> pointers) {
    if (!flash_head_size(hs)) return false;
    for (const void* p : pointers)
        if (!aligned16(p)) return false;
    return true;
}

// Backward's scratch: dsum (B,NH,T) float32, the dS^T tiles, and (for a backward without
// the forward's output) a recomputed output (B,T,C) with its logsumexp.
struct FusedScratch {
    std::size_t dsum, ds, out, lse, total;
};

FusedScratch fused_scratch(int B, int T, int C, int NH) {  // per query head, whatever NKV
    FusedScratch s{};
    const std::size_t rows = std::size_t(B) * NH * T;
    s.dsum = round256(rows * sizeof(float));
    s.ds = round256(std::size_t(B) * NH * std::size_t(flash_ds_tiles_per_head(T)) * 128 * 64 * sizeof(bf16));
    s.out = round256(std::size_t(B) * T * C * sizeof(bf16));
    s.lse = round256(rows * sizeof(float));
    s.total = s.dsum + s.ds + s.out + s.lse;
    return s;
}

}  // namespace

std::int64_t attention_saved(int B, int T, int NH) {
    const std::int64_t floats = std::int64_t(B) * NH * T;
    return (2 * floats + 2 + 7) / 8 * 8;  // 2 BF16 per float, 2 of alignment slack, a multiple of 8
}

std::size_t attention_forward_workspace(int B, int T, int C, int NH, int NKV) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0 || NKV <= 0 || NH % NKV != 0) return 0;
    const int group = NH / NKV;
    return flash_head_size(C / NH) ? cublas_bytes(T, 1) : cublas_bytes(T, group > 1 ? group : NH);
}

std::size_t attention_backward_workspace(int B, int T, int C, int NH, int NKV) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0 || NKV <= 0 || NH % NKV != 0) return 0;
    const int hs = C / NH, group = NH / NKV;
    const std::size_t acc = group_acc_bytes(T, hs, group);
    if (!flash_head_size(hs)) return acc + cublas_bytes(T, group > 1 ? group : NH);
    return std::max(fused_scratch(B, T, C, NH).total, acc + cublas_bytes(T, 1));
}

void attention_forward(bf16* out, bf16* att, const bf16* qkv, int B, int T, int C, int NH, int NKV, Workspace ws,
                       cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(C, NH, NKV, "attention_forward");
    const int hs = C / NH;
    float* lse = lse_of(att);
    if (fused(hs, {out, qkv})) {
        FlashArgs a;
        a.B = B, a.T = T, a.C = C, a.NH = NH, a.NKV = NKV, a.hs = hs;
        a.qkv = qkv, a.out = out, a.lse = lse;
        flash_forward(a, stream);
        return;
    }
    cublas_forward(out, lse, qkv, B, T, C, NH, NKV, ws, stream);
}

void attention_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const bf16* att, int B, int T,
                        int C, int NH, int NKV, Workspace ws, cudaStream_t stream) {
    if (B <= 0 || T <= 0 || C <= 0) return;
    check_shape(C, NH, NKV, "attention_backward");
    const int hs = C / NH;
    const float* lse = lse_of(att);
    if (fused(hs, {dqkv, dout, qkv, out})) {
        const FusedScratch s = fused_scratch(B, T, C, NH);
        require_workspace(ws, out ? s.dsum + s.ds : s.total, "attention_backward");
        auto* base = static_cast<unsigned char*>(ws.ptr);
        FlashArgs a;
        a.B = B, a.T = T, a.C = C, a.NH = NH, a.NKV = NKV, a.hs = hs;
        a.qkv = qkv;
        if (!out) {  // recompute the forward's output (the same bits: the forward is deterministic)
            a.out = reinterpret_cast<bf16*>(base + s.dsum + s.ds);
            a.lse = reinterpret_cast<float*>(base + s.dsum + s.ds + s.out);
            flash_forward(a, stream);
        } else {
            a.out = const_cast<bf16*>(out);  // read only in backward
        }
        a.lse = const_cast<float*>(lse);  // read only in backward
        a.dout = dout;
        a.dqkv = dqkv;
        a.dsum = reinterpret_cast<float*>(base);
        a.ds = reinterpret_cast<bf16*>(base + s.dsum);
        flash_backward(a, stream);
        return;
    }
    cublas_backward(dqkv, dout, qkv, lse, B, T, C, NH, NKV, ws, stream);
}

}  // namespace fp8scope::cuda
