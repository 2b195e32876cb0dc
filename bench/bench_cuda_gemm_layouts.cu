// The BF16 GEMMs of one training step of a model with d_model C (default 4096, MLP 4C,
// tokens M = B * T = 8192), in the three layouts a linear layer runs (fprop: x W^T,
// dgrad: dy W, wgrad: dy^T x with a float32 result), each timed with every algorithm
// cuBLASLt's heuristic offers (up to 16): what its first choice, which the engine takes,
// leaves against the best of them, per shape and summed over the layers of a step; and
// whether each algorithm's result has the same bits as the first choice's (an algorithm
// picked by timing keeps a run reproducible only if it does), with its split-K count.
//
//   bench_cuda_gemm_layouts [--c C] [--tokens M] [--layers L]
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/gemm/internal.h"
#include "cuda/runtime/check.h"
#include "cuda_bench.cuh"

using namespace fp8scope;
using namespace fp8scope::bench;

namespace {

// Row-major out (M, N) = op(A) op(B): A stored (M, K), or (K, M) when a_t; B stored
// (K, N), or (N, K) when b_t. cuBLASLt sees the column-major transposes: out^T = B^T A^T.
struct Problem {
    const char* what;
    std::int64_t m, n, k;
    bool a_t, b_t, f32_out;
};

struct Timed {
    double first_ms = 0, best_ms = 0;
    int best = 0, offered = 0;
    std::string bits;  // per algorithm: '=' same bits as the first, 'x' different; split-K count after
};

int split_k(const cublasLtMatmulAlgo_t& algo) {
    std::int32_t v = 1;
    std::size_t got = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &v, sizeof v, &got);
    return v;
}

__global__ void count_differences(const std::uint32_t* a, const std::uint32_t* b, std::size_t n,
                                  unsigned long long* count) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
        if (a[i] != b[i]) atomicAdd(count, 1ull);
}

bool same_bits(const void* a, const void* b, std::size_t bytes, cudaStream_t stream) {
    static unsigned long long* count = nullptr;
    if (!count) FP8SCOPE_CUDA_CHECK(cudaMalloc(&count, sizeof *count));
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof *count, stream));
    count_differences<<<1024, 256, 0, stream>>>(static_cast<const std::uint32_t*>(a),
                                                static_cast<const std::uint32_t*>(b), bytes / 4, count);
    FP8SCOPE_CUDA_LAUNCHED();
    unsigned long long host = 0;
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, stream));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));
    return host == 0;
}

Timed run(cublasLtHandle_t lt, cudaStream_t stream, void* ws, std::size_t ws_bytes, const Problem& p, void* a,
          void* b, void* out, void* first_out) {
    cublasLtMatmulDesc_t desc;
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = p.b_t ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = p.a_t ? CUBLAS_OP_T : CUBLAS_OP_N;
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    const std::uint64_t m = std::uint64_t(p.m), n = std::uint64_t(p.n), k = std::uint64_t(p.k);
    cublasLtMatrixLayout_t la, lb, ld;
    // cuBLAS A = our B: column-major (N, K) as stored (K, N) row-major, or (K, N) when b_t.
    FP8SCOPE_CUBLAS_CHECK(p.b_t ? cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, std::int64_t(k))
                                : cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, k, std::int64_t(n)));
    FP8SCOPE_CUBLAS_CHECK(p.a_t ? cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, m, k, std::int64_t(m))
                                : cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, std::int64_t(k)));
    FP8SCOPE_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&ld, p.f32_out ? CUDA_R_32F : CUDA_R_16BF, n, m, std::int64_t(n)));
    cublasLtMatmulPreference_t pref;
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t wsb = ws_bytes;
    FP8SCOPE_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb));
    const std::uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;  // as the engine allows
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                               &reductions, sizeof reductions));
    cublasLtMatmulHeuristicResult_t results[16];
    int found = 0;
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, ld, ld, pref, 16, results, &found));
    Timed t;
    t.offered = found;
    const float alpha = 1.0f, beta = 0.0f;
    const std::size_t out_bytes = std::size_t(p.m * p.n) * (p.f32_out ? 4 : 2);
    for (int i = 0; i < found; ++i) {
        const double ms = median_ms(stream, 10, [&] {
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmul(lt, desc, &alpha, b, la, a, lb, &beta, out, ld, out, ld,
                                                 &results[i].algo, ws, ws_bytes, stream));
        });
        if (i == 0) t.first_ms = t.best_ms = ms;
        if (ms < t.best_ms) t.best_ms = ms, t.best = i;
        if (i == 0) FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(first_out, out, out_bytes, cudaMemcpyDeviceToDevice, stream));
        t.bits += i == 0 || same_bits(first_out, out, out_bytes, stream) ? '=' : 'x';
        t.bits += std::to_string(split_k(results[i].algo));
        t.bits += ' ';
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(desc);
    return t;
}

}  // namespace

int main(int argc, char** argv) {
    std::int64_t C = 4096, M = 8192;
    int layers = 8;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--c")) C = std::atoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--tokens")) M = std::atoll(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--layers")) layers = std::atoi(argv[i + 1]);
    }
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        std::printf("bench_cuda_gemm_layouts: no CUDA device\n");
        return 1;
    }
    std::printf("gpu: %s, cuBLASLt %zu; C %lld, tokens %lld, %d layers; BF16 in, float32 accumulation\n", prop.name,
                cublasLtGetVersion(), (long long)C, (long long)M, layers);
    cudaStream_t stream;
    FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&stream));
    cublasLtHandle_t lt;
    FP8SCOPE_CUBLAS_CHECK(cublasLtCreate(&lt));
    const std::size_t ws_bytes = cuda::GemmRunner::kDefaultWorkspace;
    const std::int64_t H = 4 * C, most = std::max(M, H) * std::max(3 * C, H);
    void *a, *b, *out, *first_out, *ws;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&a, most * 2));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&b, most * 2));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&out, most * 4));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&first_out, most * 4));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
    fill_normal<<<prop.multiProcessorCount * 8, 256, 0, stream>>>(a, true, most, 1u);
    fill_normal<<<prop.multiProcessorCount * 8, 256, 0, stream>>>(b, true, most, 2u);
    FP8SCOPE_CUDA_LAUNCHED();

    // Per layer: qkv (C -> 3C), attention projection (C -> C), fc1 (C -> 4C), fc2 (4C -> C).
    struct Linear {
        const char* name;
        std::int64_t in, out;
    };
    const Linear linears[] = {{"qkv", C, 3 * C}, {"proj", C, C}, {"fc1", C, H}, {"fc2", H, C}};
    std::printf("  %-6s %-6s %6s %6s %6s  %9s %7s  %9s %7s  %s\n", "linear", "pass", "m", "n", "k", "first ms",
                "TFLOP/s", "best ms", "TFLOP/s", "best of");
    double first_total = 0, best_total = 0;
    for (const Linear& l : linears) {
        const Problem problems[] = {{"fprop", M, l.out, l.in, false, true, false},
                                    {"dgrad", M, l.in, l.out, false, false, false},
                                    {"wgrad", l.out, l.in, M, true, false, true}};
        for (const Problem& p : problems) {
            const Timed t = run(lt, stream, ws, ws_bytes, p, a, b, out, first_out);
            const double flop = 2.0 * p.m * p.n * p.k;
            std::printf("  %-6s %-6s %6lld %6lld %6lld  %9.3f %7.0f  %9.3f %7.0f  #%d of %d  bits/split-k %s\n", l.name,
                        p.what, (long long)p.m, (long long)p.n, (long long)p.k, t.first_ms, flop / t.first_ms * 1e-9,
                        t.best_ms, flop / t.best_ms * 1e-9, t.best, t.offered, t.bits.c_str());
            first_total += t.first_ms * layers;
            best_total += t.best_ms * layers;
        }
    }
    std::printf("the step's layer GEMMs (%d layers): heuristic's first choice %.2f ms, best offered %.2f ms (%.1f%%)\n",
                layers, first_total, best_total, 100.0 * (first_total - best_total) / first_total);
    cudaFree(a);
    cudaFree(b);
    cudaFree(out);
    cudaFree(first_out);
    cudaFree(ws);
    cublasLtDestroy(lt);
    cudaStreamDestroy(stream);
    return 0;
}
