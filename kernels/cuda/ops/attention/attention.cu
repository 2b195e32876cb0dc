// Causal multi-head attention: the entry points of ops/ops.h. Three paths:
//   fused (head sizes 64 and 128, 16-byte aligned pointers): FlashAttention-2 style
//     kernels (flash.cuh) that never hold a T x T matrix in memory;
//   padded (other head sizes below 128): the fused kernels on heads copied to 64 or 128
//     columns, zero after hs (see the padded path below);
//   cuBLAS (head sizes above 128, and fused shapes with unaligned pointers; llm.c style):
//     the T x T scores of a few (batch row, head) pairs at a time are materialised in the
//     workspace and the products are strided-batched GEMMs on tensor cores (BF16 in,
//     float32 accumulation), with softmax kernels between them.
// Both save the same state, the row logsumexp L (B,NH,T) in float32 (ops/ops.h), so the saved
// `att` is O(T) per row; the cuBLAS backward recomputes the scores from q, k and L.
//
// cuBLAS path (column-major cuBLAS terms in comments, row-major in names). qkv is read in
// place: head h of batch row b is a (T,hs) matrix of row stride W = C + 2 NKV hs at column
// h*hs. One strided-batched call covers several (batch row, head) pairs, either head h of
// several batch rows (batch stride T*W) or several heads of one batch row (batch stride hs),
// whichever needs fewer calls (see Plan). Along the heads under grouped-query attention a
// call stays within the query heads of one key/value head, whose k and v every matrix of
// the batch reads (batch stride 0). dk and dv of a group are summed in float32 over its
// query heads in order (GEMMs with beta = 1 in the workspace), then rounded to BF16 once.
// Scores and their gradients are float32 (the GEMM's output type); the probabilities P
// and dS, the operands of the following GEMMs, are BF16.
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

// P rows (T per pair of a call) = softmax of the causal part of the score rows, and
// lse[row] = max + ln(sum) (a pair's T rows at lse + pair * lse_stride). A warp per row
// keeps an online (max, sum) per lane, combined by a butterfly (every lane gets the same
// bits: the combine is commutative).
__global__ void causal_softmax_kernel(bf16* probs, float* lse, long long lse_stride, const float* scores, int T,
                                      std::int64_t rows) {
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
    if (lane == 0) lse[row / T * lse_stride + t] = m + logf(sum);
}

// P rows = exp(S - lse) on the causal part, 0 above it (backward's recomputation).
__global__ void causal_probs_kernel(bf16* probs, const float* scores, const float* lse, long long lse_stride, int T,
                                    std::int64_t rows) {
    const std::int64_t row = std::int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
    if (row >= rows) return;
    const int lane = threadIdx.x % 32;
    const int t = int(row % T);
    const float* s = scores + row * T;
    const float L = lse[row / T * lse_stride + t];
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

// dst (T rows of stride W, hs columns; `heads` of them, dst_stride apart) = acc (heads,T,hs)
// float32 rounded to BF16: key/value heads' gradients summed over their query heads.
__global__ void store_group_grad_kernel(bf16* dst, const float* acc, int heads, int T, int hs, std::int64_t W,
                                        long long dst_stride) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t per_head = std::int64_t(T) * hs;
    if (i >= heads * per_head) return;
    const std::int64_t head = i / per_head, at = i % per_head;
    dst[head * dst_stride + (at / hs) * W + at % hs] = f32_to_bf16(acc[i]);
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

// A pair is (batch row b, query head h). A strided-batched GEMM needs a constant stride
// between its matrices, which pairs have along the batch rows (head h of rows b, b+1, ..:
// stride T*W in qkv) or along the heads (heads h, h+1, .. of row b: stride hs), not both.
// Calls run along whichever covers every pair in fewer calls: a model of many short
// sequences (B > NH) would otherwise pay B calls per GEMM (cuBLAS's host cost then
// dominates a small model's step).
struct Plan {
    bool rows = false;  // along the batch rows, else along the heads
    int per_call = 1;   // pairs per call
    // Element strides between consecutive pairs of a call: of q (and dq), of k and v (and
    // dk, dv; 0 along the heads under grouped-query attention: the chunk shares them), of
    // out (and dout), and of their rows in the logsumexp (B,NH,T).
    long long q = 0, kv = 0, out = 0, lse = 0;
    int gqa_sums = 0;  // (T,hs) float32 sums of dk and dv per key/value head kept (backward, group > 1)
};

// Float32 scores, then BF16 probabilities, of n pairs.
std::size_t scores_bytes(int T, int n) {
    return round256(std::size_t(n) * T * T * sizeof(float)) + std::size_t(n) * T * T * sizeof(bf16);
}

// Backward's float32 sums of dk and dv over a group's query heads (grouped-query
// attention), in front of the scores: (T,hs) each per key/value head in flight.
std::size_t gqa_sum_bytes(int T, int hs, int heads) { return round256(2 * std::size_t(heads) * T * hs * sizeof(float)); }

// The workspace of a call of n pairs.
std::size_t call_bytes(int T, int hs, int group, bool rows, bool backward, int n) {
    const std::size_t sums = backward && group > 1 ? gqa_sum_bytes(T, hs, rows ? n : 1) : 0;
    return sums + scores_bytes(T, n);
}

constexpr std::size_t kCallBudget = std::size_t(64) << 20;  // a call's scores along the rows, when more than the heads'

// Along the heads a call covers at most the heads of a batch row (of one group under
// grouped-query attention, whose k and v the chunk shares); along the rows, every batch
// row, as the budget allows.
int most_pairs(bool rows, int B, int T, int NH, int group) {
    const int heads = group > 1 ? group : NH;
    if (!rows) return heads;
    const auto fit = int(std::min<std::size_t>(std::size_t(B), kCallBudget / scores_bytes(T, 1)));
    return std::min(B, std::max(heads, fit));
}

bool along_rows(int B, int T, int NH, int NKV) {
    const int group = NH / NKV;
    const int per_call = most_pairs(true, B, T, NH, group);
    const long long row_calls = std::int64_t(NH) * ((B + per_call - 1) / per_call);
    const long long head_calls = std::int64_t(B) * (group > 1 ? NKV : 1);
    return row_calls < head_calls;
}

std::size_t cublas_workspace(int B, int T, int C, int NH, int NKV, bool backward) {
    const bool rows = along_rows(B, T, NH, NKV);
    const int group = NH / NKV;
    return call_bytes(T, C / NH, group, rows, backward, most_pairs(rows, B, T, NH, group));
}

// The plan for ws: as many pairs per call as fit (at least 1, else the workspace is
// refused); along the heads under grouped-query attention a divisor of the group, so that
// a call never straddles two groups.
Plan plan_for(const Workspace& ws, int B, int T, int C, int NH, int NKV, bool backward, const char* op) {
    const int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs;
    Plan p;
    p.rows = along_rows(B, T, NH, NKV);
    require_workspace(ws, call_bytes(T, hs, group, p.rows, backward, 1), op);
    int n = most_pairs(p.rows, B, T, NH, group);
    while (n > 1 && call_bytes(T, hs, group, p.rows, backward, n) > ws.bytes) n = std::max(1, std::min(n - 1, n / 2));
    while (!p.rows && group > 1 && group % n != 0) --n;
    p.per_call = n;
    if (p.rows) {
        p.q = p.kv = std::int64_t(T) * W;
        p.out = std::int64_t(T) * C;
        p.lse = std::int64_t(NH) * T;
    } else {
        p.q = p.out = hs;
        p.kv = group > 1 ? 0 : hs;
        p.lse = T;
    }
    if (backward && group > 1) p.gqa_sums = p.rows ? n : 1;
    return p;
}

// The calls of a plan: the first pair (b, h) of each and its pair count, in an order that
// finishes a key/value head's query heads before it moves to another batch row.
template <class Call>
void for_each_call(const Plan& p, int B, int NH, Call call) {
    if (p.rows) {
        for (int b = 0; b < B; b += p.per_call)
            for (int h = 0; h < NH; ++h) call(b, h, std::min(p.per_call, B - b));
        return;
    }
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < NH; h += p.per_call) call(b, h, std::min(p.per_call, NH - h));
}

struct Buffers {
    float* dk_sum = nullptr;  // backward under grouped-query attention
    float* dv_sum = nullptr;
    float* scores = nullptr;
    bf16* probs = nullptr;
};

Buffers buffers_of(const Workspace& ws, const Plan& p, int T, int hs) {
    Buffers buf;
    auto* base = static_cast<unsigned char*>(ws.ptr);
    if (p.gqa_sums > 0) {
        buf.dk_sum = reinterpret_cast<float*>(base);
        buf.dv_sum = buf.dk_sum + std::int64_t(p.gqa_sums) * T * hs;
        base += gqa_sum_bytes(T, hs, p.gqa_sums);
    }
    buf.scores = reinterpret_cast<float*>(base);
    buf.probs = reinterpret_cast<bf16*>(base + round256(std::size_t(p.per_call) * T * T * sizeof(float)));
    return buf;
}

// The matrices of pair (b, h): q, k, v in qkv (row stride W), the output in out (row stride C).
struct PairAt {
    std::int64_t q, k, v, out, lse;
};
PairAt pair_at(int b, int h, int T, int C, int NH, int NKV) {
    const int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs;
    const std::int64_t row = std::int64_t(b) * T * W;
    const std::int64_t k = row + C + std::int64_t(h / group) * hs;
    return {row + std::int64_t(h) * hs, k, k + std::int64_t(NKV) * hs, std::int64_t(b) * T * C + std::int64_t(h) * hs,
            (std::int64_t(b) * NH + h) * T};
}

void cublas_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int NKV, Workspace ws,
                    cudaStream_t stream) {
    const int hs = C / NH, W = C + 2 * NKV * hs;
    const float scale = 1.0f / std::sqrt(float(hs));
    const long long TT = std::int64_t(T) * T;
    const Plan p = plan_for(ws, B, T, C, NH, NKV, false, "attention_forward");
    const Buffers buf = buffers_of(ws, p, T, hs);
    cublasHandle_t h = cublas_for(stream);
    for_each_call(p, B, NH, [&](int b, int head, int n) {
        const PairAt at = pair_at(b, head, T, C, NH, NKV);
        const std::int64_t rows = std::int64_t(n) * T;
        // S^T (T,T) col-major = K Q^T: element (t2, t) at t*T + t2, i.e. S[t][t2] row-major
        gemm(h, true, false, T, T, hs, scale, qkv + at.k, W, p.kv, qkv + at.q, W, p.q, buf.scores, CUDA_R_32F, T, TT,
             n);
        causal_softmax_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
            buf.probs, lse + at.lse, p.lse, buf.scores, T, rows);
        FP8SCOPE_CUDA_LAUNCHED();
        // out^T (hs,T) = V^T P^T: A = v (hs,T) ld W, B = P^T as stored (T,T) ld T
        gemm(h, false, false, hs, T, T, 1.0f, qkv + at.v, W, p.kv, buf.probs, T, TT, out + at.out, CUDA_R_16BF, C,
             p.out, n);
    });
}

void cublas_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const float* lse, int B, int T, int C, int NH,
                     int NKV, Workspace ws, cudaStream_t stream) {
    const int hs = C / NH, group = NH / NKV, W = C + 2 * NKV * hs;
    const float scale = 1.0f / std::sqrt(float(hs));
    const long long TT = std::int64_t(T) * T, Ths = std::int64_t(T) * hs;
    const Plan p = plan_for(ws, B, T, C, NH, NKV, true, "attention_backward");
    const Buffers buf = buffers_of(ws, p, T, hs);
    cublasHandle_t h = cublas_for(stream);
    for_each_call(p, B, NH, [&](int b, int head, int n) {
        const PairAt at = pair_at(b, head, T, C, NH, NKV);
        const std::int64_t rows = std::int64_t(n) * T;
        const bf16 *q = qkv + at.q, *k = qkv + at.k, *v = qkv + at.v, *d = dout + at.out;
        bf16 *dq = dqkv + at.q, *dk = dqkv + at.k, *dv = dqkv + at.v;
        gemm(h, true, false, T, T, hs, scale, k, W, p.kv, q, W, p.q, buf.scores, CUDA_R_32F, T, TT, n);
        causal_probs_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
            buf.probs, buf.scores, lse + at.lse, p.lse, T, rows);
        FP8SCOPE_CUDA_LAUNCHED();
        // Under grouped-query attention dk and dv go to the group's float32 sums: along the
        // rows a call's pairs are n rows of one query head (sums of n key/value heads, one
        // GEMM); along the heads, n query heads of one key/value head (one GEMM each).
        const int heads = p.rows ? 1 : n;
        auto to_sum = [&](const bf16* a, int lda, long long sa, float* sum) {
            if (p.rows) {
                gemm(h, false, true, hs, T, T, 1.0f, a, lda, sa, buf.probs, T, TT, sum, CUDA_R_32F, hs, Ths, n,
                     head % group == 0 ? 0.0f : 1.0f);
                return;
            }
            for (int i = 0; i < n; ++i)
                gemm(h, false, true, hs, T, T, 1.0f, a + i * sa, lda, 0, buf.probs + i * TT, T, 0, sum, CUDA_R_32F, hs,
                     0, 1, (head + i) % group == 0 ? 0.0f : 1.0f);
        };
        // dv^T (hs,T) = dO^T P: A = dout (hs,T) ld C, B = P^T as stored, transposed
        if (group == 1) gemm(h, false, true, hs, T, T, 1.0f, d, C, p.out, buf.probs, T, TT, dv, CUDA_R_16BF, W, p.kv, n);
        else to_sum(d, C, p.out, buf.dv_sum);
        // dP^T (T,T) col-major = V dO^T: element (t2, t) = <dout[t], v[t2]> (over the scores)
        gemm(h, true, false, T, T, hs, 1.0f, v, W, p.kv, d, C, p.out, buf.scores, CUDA_R_32F, T, TT, n);
        causal_softmax_backward_kernel<<<blocks_for(rows, kRowsPerBlock), kRowsPerBlock * 32, 0, stream>>>(
            buf.probs, buf.probs, buf.scores, T, rows, scale);
        FP8SCOPE_CUDA_LAUNCHED();
        // dq^T (hs,T) = K^T dS^T: A = k (hs,T) ld W, B = dS^T as stored (T,T) ld T
        gemm(h, false, false, hs, T, T, 1.0f, k, W, p.kv, buf.probs, T, TT, dq, CUDA_R_16BF, W, p.q, n);
        // dk^T (hs,T) = Q^T dS: B = dS^T as stored, transposed
        if (group == 1) {
            gemm(h, false, true, hs, T, T, 1.0f, q, W, p.q, buf.probs, T, TT, dk, CUDA_R_16BF, W, p.kv, n);
            return;
        }
        to_sum(q, W, p.q, buf.dk_sum);
        if ((head + heads) % group != 0) return;  // the group's sums are complete after its last query head
        const int sums = p.gqa_sums;
        const unsigned blocks = blocks_for(std::int64_t(sums) * Ths, 256);
        store_group_grad_kernel<<<blocks, 256, 0, stream>>>(dk, buf.dk_sum, sums, T, hs, W, p.kv);
        FP8SCOPE_CUDA_LAUNCHED();
        store_group_grad_kernel<<<blocks, 256, 0, stream>>>(dv, buf.dv_sum, sums, T, hs, W, p.kv);
        FP8SCOPE_CUDA_LAUNCHED();
    });
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

// The fused backward with its scratch at `base` (fused_scratch(a.B, a.T, a.C, a.NH)); a.out
// null: the forward's output is recomputed first (the same bits: the forward is deterministic).
void fused_backward(FlashArgs a, unsigned char* base, const FusedScratch& s, cudaStream_t stream) {
    if (!a.out) {
        FlashArgs f = a;
        f.out = reinterpret_cast<bf16*>(base + s.dsum + s.ds);
        f.lse = reinterpret_cast<float*>(base + s.dsum + s.ds + s.out);
        flash_forward(f, stream);
        a.out = f.out;
    }
    a.dsum = reinterpret_cast<float*>(base);
    a.ds = reinterpret_cast<bf16*>(base + s.dsum);
    flash_backward(a, stream);
}

// --- the padded path -----------------------------------------------------------------------------
// Head sizes below 128 that the fused kernels do not take (hs 32 of a small model, 80, 96):
// q, k and v are copied into heads of the next size they take (64 or 128), zero after hs,
// and the fused kernels run there with the softmax scale of hs. The zeros add nothing to
// q.k and make zero columns of the output and of dqkv, which are not copied back. A few
// launches a layer whatever B and NH, against the cuBLAS path's GEMM calls per head.

int padded_head(int hs) { return hs < 64 ? 64 : hs < 128 ? 128 : 0; }

// dst (rows, heads * P) = heads of hs columns from column 0 of src (rows, row stride
// `stride`), each zero-padded to P.
__global__ void pad_heads_kernel(bf16* dst, const bf16* src, std::int64_t rows, int heads, int hs, int P,
                                 std::int64_t stride) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t per_row = std::int64_t(heads) * P;
    if (i >= rows * per_row) return;
    const std::int64_t r = i / per_row;
    const int at = int(i % per_row), h = at / P, c = at % P;
    dst[i] = c < hs ? src[r * stride + std::int64_t(h) * hs + c] : bf16(0);
}

// The first hs columns of each head of src (rows, heads * P) into dst (rows, row stride `stride`).
__global__ void unpad_heads_kernel(bf16* dst, const bf16* src, std::int64_t rows, int heads, int hs, int P,
                                   std::int64_t stride) {
    const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t per_row = std::int64_t(heads) * hs;
    if (i >= rows * per_row) return;
    const std::int64_t r = i / per_row;
    const int at = int(i % per_row), h = at / hs, c = at % hs;
    dst[r * stride + at] = src[r * std::int64_t(heads) * P + std::int64_t(h) * P + c];
}

void pad_heads(bf16* dst, const bf16* src, std::int64_t rows, int heads, int hs, int P, std::int64_t stride,
               cudaStream_t stream) {
    pad_heads_kernel<<<blocks_for(rows * heads * P, 256), 256, 0, stream>>>(dst, src, rows, heads, hs, P, stride);
    FP8SCOPE_CUDA_LAUNCHED();
}

void unpad_heads(bf16* dst, const bf16* src, std::int64_t rows, int heads, int hs, int P, std::int64_t stride,
                 cudaStream_t stream) {
    unpad_heads_kernel<<<blocks_for(rows * heads * hs, 256), 256, 0, stream>>>(dst, src, rows, heads, hs, P, stride);
    FP8SCOPE_CUDA_LAUNCHED();
}

// The workspace of the padded path: padded qkv and output, and in backward padded dout and
// dqkv and the fused backward's scratch.
struct Padded {
    int P = 0;
    std::size_t qkv = 0, out = 0, total = 0;
    FusedScratch fused{};
};

Padded padded_layout(int B, int T, int C, int NH, int NKV, bool backward) {
    Padded p;
    p.P = padded_head(C / NH);
    const std::size_t rows = std::size_t(B) * T;
    p.qkv = round256(rows * std::size_t(NH + 2 * NKV) * p.P * sizeof(bf16));
    p.out = round256(rows * std::size_t(NH) * p.P * sizeof(bf16));
    p.total = p.qkv + p.out;
    if (backward) {
        p.fused = fused_scratch(B, T, NH * p.P, NH);
        p.total = 2 * (p.qkv + p.out) + p.fused.total;
    }
    return p;
}

FlashArgs padded_args(int B, int T, int C, int NH, int NKV, int P) {
    FlashArgs a;
    a.B = B, a.T = T, a.C = NH * P, a.NH = NH, a.NKV = NKV, a.hs = P, a.scale_hs = C / NH;
    return a;
}

void padded_forward(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, int NKV, Workspace ws,
                    cudaStream_t stream) {
    const int hs = C / NH, W = C + 2 * NKV * hs;
    const Padded p = padded_layout(B, T, C, NH, NKV, false);
    require_workspace(ws, p.total, "attention_forward");
    auto* base = static_cast<unsigned char*>(ws.ptr);
    const std::int64_t rows = std::int64_t(B) * T;
    FlashArgs a = padded_args(B, T, C, NH, NKV, p.P);
    bf16* q = reinterpret_cast<bf16*>(base);
    bf16* o = reinterpret_cast<bf16*>(base + p.qkv);
    pad_heads(q, qkv, rows, NH + 2 * NKV, hs, p.P, W, stream);
    a.qkv = q, a.out = o, a.lse = lse;
    flash_forward(a, stream);
    unpad_heads(out, o, rows, NH, hs, p.P, C, stream);
}

void padded_backward(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, int B, int T,
                     int C, int NH, int NKV, Workspace ws, cudaStream_t stream) {
    const int hs = C / NH, W = C + 2 * NKV * hs;
    const Padded p = padded_layout(B, T, C, NH, NKV, true);
    require_workspace(ws, p.total, "attention_backward");
    auto* base = static_cast<unsigned char*>(ws.ptr);
    const std::int64_t rows = std::int64_t(B) * T;
    bf16* q = reinterpret_cast<bf16*>(base);
    bf16* dq = reinterpret_cast<bf16*>(base + p.qkv);
    bf16* o = reinterpret_cast<bf16*>(base + 2 * p.qkv);
    bf16* d = reinterpret_cast<bf16*>(base + 2 * p.qkv + p.out);
    pad_heads(q, qkv, rows, NH + 2 * NKV, hs, p.P, W, stream);
    pad_heads(d, dout, rows, NH, hs, p.P, C, stream);
    if (out) pad_heads(o, out, rows, NH, hs, p.P, C, stream);
    FlashArgs a = padded_args(B, T, C, NH, NKV, p.P);
    a.qkv = q, a.out = out ? o : nullptr, a.lse = const_cast<float*>(lse), a.dout = d, a.dqkv = dq;
    fused_backward(a, base + 2 * (p.qkv + p.out), p.fused, stream);
    unpad_heads(dqkv, dq, rows, NH + 2 * NKV, hs, p.P, W, stream);
}

}  // namespace

std::int64_t attention_saved(int B, int T, int NH) {
    const std::int64_t floats = std::int64_t(B) * NH * T;
    return (2 * floats + 2 + 7) / 8 * 8;  // 2 BF16 per float, 2 of alignment slack, a multiple of 8
}

std::size_t attention_forward_workspace(int B, int T, int C, int NH, int NKV) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0 || NKV <= 0 || NH % NKV != 0) return 0;
    const int hs = C / NH;
    if (flash_head_size(hs)) return scores_bytes(T, 1);  // unaligned pointers: the cuBLAS path, a pair at a time
    return padded_head(hs) ? padded_layout(B, T, C, NH, NKV, false).total : cublas_workspace(B, T, C, NH, NKV, false);
}

std::size_t attention_backward_workspace(int B, int T, int C, int NH, int NKV) {
    if (B <= 0 || T <= 0 || C <= 0 || NH <= 0 || C % NH != 0 || NKV <= 0 || NH % NKV != 0) return 0;
    const int hs = C / NH;
    if (!flash_head_size(hs))
        return padded_head(hs) ? padded_layout(B, T, C, NH, NKV, true).total : cublas_workspace(B, T, C, NH, NKV, true);
    // Unaligned pointers send a fused shape to the cuBLAS path, a pair at a time.
    return std::max(fused_scratch(B, T, C, NH).total,
                    call_bytes(T, hs, NH / NKV, along_rows(B, T, NH, NKV), true, 1));
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
    if (!flash_head_size(hs) && padded_head(hs)) padded_forward(out, lse, qkv, B, T, C, NH, NKV, ws, stream);
    else cublas_forward(out, lse, qkv, B, T, C, NH, NKV, ws, stream);
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
        FlashArgs a;
        a.B = B, a.T = T, a.C = C, a.NH = NH, a.NKV = NKV, a.hs = hs;
        a.qkv = qkv;
        a.out = const_cast<bf16*>(out);   // read only in backward; null: recomputed
        a.lse = const_cast<float*>(lse);  // read only in backward
        a.dout = dout;
        a.dqkv = dqkv;
        fused_backward(a, static_cast<unsigned char*>(ws.ptr), s, stream);
        return;
    }
    if (!flash_head_size(hs) && padded_head(hs)) {
        padded_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, NKV, ws, stream);
        return;
    }
    cublas_backward(dqkv, dout, qkv, lse, B, T, C, NH, NKV, ws, stream);
}

}  // namespace fp8scope::cuda
