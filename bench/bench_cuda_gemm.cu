// The cuBLASLt GEMMs of the CUDA backend (kernels/cuda/gemm/gemm.h) against a bare cuBLASLt
// call on the same problem: descriptors built once, the same heuristic query (so the same
// algorithm, printed when it differs), scales already in cuBLASLt's layout. The runner's
// figure includes everything its entry point does per call (plan lookup, pointer
// attributes, the scale rearrangement kernel), so runner/bare is its overhead; the goal
// is >= 95%. Also FP8 per-tensor with fast accumulation, to price the accurate default.
//
// Shapes: 8192^3, 4096^3 and the training shapes m = B*T = 8192 with n, k in
// {4096, 12288, 16384}. Median of >= 30 timed runs after warm-up, CUDA events, runner and
// bare interleaved. Ceilings measured on one H200 (docs/GPU.md): E4M3 per-tensor ~1490,
// 1x128 x 128x128 ~1230, 1x128 x 1x128 ~890, BF16 760-790 TFLOP/s.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/gemm/gemm.h"
#include "cuda/gemm/internal.h"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace {

constexpr int kWarmup = 5;
constexpr int kRuns = 30;

__device__ std::uint64_t mix(std::uint64_t x) {  // splitmix64
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// FP8 codes with exponents around 1 (E4M3 2^-3..2^3, E5M2 alike), random sign and
// mantissa: never zero, never NaN/Inf.
__global__ void fill_fp8(std::uint8_t* p, std::size_t n, std::uint64_t seed, bool e5m2) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
        const std::uint64_t h = mix(seed * 0x1000003ull + i);
        const unsigned sign = unsigned(h & 1) << 7;
        const unsigned exp = e5m2 ? 12u + unsigned((h >> 1) % 7) : 4u + unsigned((h >> 1) % 7);
        const unsigned mant = unsigned(h >> 8) & (e5m2 ? 3u : 7u);
        p[i] = std::uint8_t(sign | (e5m2 ? (exp << 2) | mant : (exp << 3) | mant));
    }
}

__global__ void fill_bf16(__nv_bfloat16* p, std::size_t n, std::uint64_t seed) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x) {
        const std::uint64_t h = mix(seed * 0x1000003ull + i);
        const float u = float(h >> 40) * (1.0f / float(1 << 24));  // [0, 1)
        p[i] = __float2bfloat16_rn((h & 1 ? -1.0f : 1.0f) * (0.25f + u));
    }
}

__global__ void fill_scales(float* p, std::size_t n, std::uint64_t seed) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n; i += std::size_t(gridDim.x) * blockDim.x)
        p[i] = ldexpf(1.0f + float(mix(seed + i) >> 44) / float(1 << 20), -int(mix(seed ^ i) % 6));
}

template <class F>
void launch_fill(F kernel_call) {
    kernel_call(dim3(1024), dim3(256));
    FP8SCOPE_CUDA_LAUNCHED();
}

enum class Mode { PerTensor, PerTensorFast, Tile1x128Block128, Tile1x128Tile1x128, Bf16 };

const char* mode_name(Mode m) {
    switch (m) {
    case Mode::PerTensor: return "E4M3 per-tensor";
    case Mode::PerTensorFast: return "E4M3 per-tensor fast";
    case Mode::Tile1x128Block128: return "E4M3 1x128 x 128x128";
    case Mode::Tile1x128Tile1x128: return "E4M3 1x128 x 1x128";
    case Mode::Bf16: return "BF16";
    }
    return "?";
}

// A bare cuBLASLt GEMM of `g` (its scales already in cuBLASLt's layout): what the runner
// does once per problem, written out plainly.
struct Bare {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;

    Bare(cublasLtHandle_t handle, const GemmArgs& g, std::size_t ws_bytes) {
        const bool fp8 = g.a.dtype == DType::E4M3 || g.a.dtype == DType::E5M2;
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;  // D (n,m) = B (n,k) A^T
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
        if (fp8) {
            const std::int8_t fast = g.fast_accum ? 1 : 0;
            const std::int32_t mode_a = detail::cublas_scale_mode(g.b.scaling), mode_b = detail::cublas_scale_mode(g.a.scaling);
            const void* sa = g.b.scale_inv;
            const void* sb = g.a.scale_inv;
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)));
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof(mode_a)));
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof(mode_b)));
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof(sa)));
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof(sb)));
        }
        const std::uint64_t m = std::uint64_t(g.m), n = std::uint64_t(g.n), k = std::uint64_t(g.k);
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, detail::cuda_data_type(g.b.dtype), k, n, std::int64_t(k)));
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, detail::cuda_data_type(g.a.dtype), k, m, std::int64_t(k)));
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, detail::cuda_data_type(g.out_dtype), n, m, std::int64_t(n)));
        cublasLtMatmulPreference_t pref = nullptr;
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        const std::uint64_t ws = ws_bytes;
        const std::uint32_t align = 256;  // cudaMalloc'd
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
        for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
            FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)));
        cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        const cublasStatus_t st =
            cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, ld, ld, pref, 1, &result, &found);
        cublasLtMatmulPreferenceDestroy(pref);
        ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
        algo = result.algo;
    }
    ~Bare() {
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatmulDescDestroy(desc);
    }
    void run(cublasLtHandle_t handle, const GemmArgs& g, void* ws, std::size_t ws_bytes, cudaStream_t s) {
        const float alpha = 1.0f, beta = 0.0f;
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatmul(handle, desc, &alpha, g.b.data, la, g.a.data, lb, &beta, g.out, ld, g.out,
                                             ld, &algo, ws, ws_bytes, s));
    }
};

template <class F>
float time_ms(F&& call, cudaStream_t s, cudaEvent_t start, cudaEvent_t stop) {
    FP8SCOPE_CUDA_CHECK(cudaEventRecord(start, s));
    call();
    FP8SCOPE_CUDA_CHECK(cudaEventRecord(stop, s));
    FP8SCOPE_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FP8SCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
}

float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Buffers {
    void* a = nullptr;
    void* b = nullptr;
    void* out = nullptr;
    float* sa = nullptr;        // our grids
    float* sb = nullptr;
    float* sa_ready = nullptr;  // cuBLASLt's layout
    float* sb_ready = nullptr;
    Buffers(std::int64_t m, std::int64_t n, std::int64_t k) {
        const std::size_t grid_a = std::size_t(m) * std::size_t((k + 127) / 128) + 64;
        const std::size_t grid_b = std::size_t(n) * std::size_t((k + 127) / 128) + 64;
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&a, std::size_t(m * k) * 2));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&b, std::size_t(n * k) * 2));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&out, std::size_t(m * n) * 4));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&sa, grid_a * 4));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&sb, grid_b * 4));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&sa_ready, grid_a * 4));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&sb_ready, grid_b * 4));
        launch_fill([&](dim3 g, dim3 b_) { fill_scales<<<g, b_>>>(sa, grid_a, 11); });
        launch_fill([&](dim3 g, dim3 b_) { fill_scales<<<g, b_>>>(sb, grid_b, 12); });
    }
    ~Buffers() {
        for (void* p : {a, b, out, static_cast<void*>(sa), static_cast<void*>(sb), static_cast<void*>(sa_ready),
                        static_cast<void*>(sb_ready)})
            cudaFree(p);
    }
};

void bench_case(GemmRunner& runner, cublasLtHandle_t handle, void* ws, std::size_t ws_bytes, Buffers& buf,
                std::int64_t m, std::int64_t n, std::int64_t k, Mode mode, cudaEvent_t e0, cudaEvent_t e1) {
    cudaStream_t s = runner.stream();
    GemmArgs g;
    g.m = m, g.n = n, g.k = k;
    g.a.data = buf.a, g.b.data = buf.b, g.out = buf.out, g.out_dtype = DType::BF16;
    const bool fp8 = mode != Mode::Bf16;
    if (fp8) {
        launch_fill([&](dim3 gr, dim3 bl) { fill_fp8<<<gr, bl, 0, s>>>(static_cast<std::uint8_t*>(buf.a), std::size_t(m * k), 1, false); });
        launch_fill([&](dim3 gr, dim3 bl) { fill_fp8<<<gr, bl, 0, s>>>(static_cast<std::uint8_t*>(buf.b), std::size_t(n * k), 2, false); });
        g.a.dtype = g.b.dtype = DType::E4M3;
    } else {
        launch_fill([&](dim3 gr, dim3 bl) { fill_bf16<<<gr, bl, 0, s>>>(static_cast<__nv_bfloat16*>(buf.a), std::size_t(m * k), 1); });
        launch_fill([&](dim3 gr, dim3 bl) { fill_bf16<<<gr, bl, 0, s>>>(static_cast<__nv_bfloat16*>(buf.b), std::size_t(n * k), 2); });
    }
    switch (mode) {
    case Mode::PerTensor:
    case Mode::PerTensorFast: g.a.scaling = g.b.scaling = GemmScaling::PerTensor; break;
    case Mode::Tile1x128Block128: g.a.scaling = GemmScaling::Tile1x128, g.b.scaling = GemmScaling::Block128; break;
    case Mode::Tile1x128Tile1x128: g.a.scaling = g.b.scaling = GemmScaling::Tile1x128; break;
    case Mode::Bf16: break;
    }
    g.fast_accum = mode == Mode::PerTensorFast;
    if (fp8) g.a.scale_inv = buf.sa, g.b.scale_inv = buf.sb;

    // The bare call reads grids already in cuBLASLt's layout.
    GemmArgs bare_args = g;
    if (fp8 && g.a.scaling != GemmScaling::PerTensor) {
        to_gemm_ready_scales(buf.sa_ready, buf.sa, g.a.scaling, m, k, s);
        to_gemm_ready_scales(buf.sb_ready, buf.sb, g.b.scaling, n, k, s);
        bare_args.a.scale_inv = buf.sa_ready, bare_args.b.scale_inv = buf.sb_ready;
    }
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(s));

    Bare bare(handle, bare_args, ws_bytes);
    const std::string runner_algo = runner.describe_plan(g);
    if (!bare.ok) {
        std::printf("%-22s %6lld %6lld %6lld  bare: no algorithm; runner: %s\n", mode_name(mode), (long long)m,
                    (long long)n, (long long)k, runner_algo.c_str());
        return;
    }
    const std::string bare_algo = detail::describe_algo(bare.algo);

    auto run_bare = [&] { bare.run(handle, bare_args, ws, ws_bytes, s); };
    auto run_runner = [&] { runner.gemm(g); };
    for (int i = 0; i < kWarmup; ++i) run_bare(), run_runner();
    std::vector<float> t_bare, t_runner;
    for (int i = 0; i < kRuns; ++i) {
        t_bare.push_back(time_ms(run_bare, s, e0, e1));
        t_runner.push_back(time_ms(run_runner, s, e0, e1));
    }
    const double flop = 2.0 * double(m) * double(n) * double(k);
    const double tb = median(t_bare), tr = median(t_runner);
    std::printf("%-22s %6lld %6lld %6lld  bare %8.3f ms %7.1f TF/s  runner %8.3f ms %7.1f TF/s  runner/bare %5.1f%%%s\n",
                mode_name(mode), (long long)m, (long long)n, (long long)k, tb, flop / tb / 1e9, tr, flop / tr / 1e9,
                100.0 * tb / tr, bare_algo == runner_algo ? "" : "  (algorithms differ)");
    if (bare_algo != runner_algo)
        std::printf("    bare:   %s\n    runner: %s\n", bare_algo.c_str(), runner_algo.c_str());
}

}  // namespace
}  // namespace fp8scope::cuda

int main() {
    using namespace fp8scope::cuda;
    try {
        int dev = 0;
        cudaDeviceProp prop{};
        FP8SCOPE_CUDA_CHECK(cudaGetDevice(&dev));
        FP8SCOPE_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
        std::printf("GPU: %s (sm_%d%d, %d SMs), cuBLASLt %zu\n", prop.name, prop.major, prop.minor,
                    prop.multiProcessorCount, cublasLtGetVersion());
        std::printf("median of %d runs after %d warm-up; bare = cuBLASLt with prepared descriptors and scales\n",
                    kRuns, kWarmup);

        cudaStream_t stream;
        FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&stream));
        GemmRunner runner(stream);
        cublasLtHandle_t handle;
        FP8SCOPE_CUBLAS_CHECK(cublasLtCreate(&handle));
        const std::size_t ws_bytes = GemmRunner::kDefaultWorkspace;
        void* ws = nullptr;
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
        cudaEvent_t e0, e1;
        FP8SCOPE_CUDA_CHECK(cudaEventCreate(&e0));
        FP8SCOPE_CUDA_CHECK(cudaEventCreate(&e1));

        struct Shape {
            std::int64_t m, n, k;
        };
        std::vector<Shape> shapes = {{8192, 8192, 8192}, {4096, 4096, 4096}};
        for (std::int64_t n : {4096, 12288, 16384})
            for (std::int64_t k : {4096, 12288, 16384}) shapes.push_back({8192, n, k});
        const Mode modes[] = {Mode::PerTensor, Mode::PerTensorFast, Mode::Tile1x128Block128, Mode::Tile1x128Tile1x128,
                              Mode::Bf16};
        std::printf("%-22s %6s %6s %6s\n", "mode", "m", "n", "k");
        for (const Shape& sh : shapes) {
            Buffers buf(sh.m, sh.n, sh.k);
            for (Mode md : modes) bench_case(runner, handle, ws, ws_bytes, buf, sh.m, sh.n, sh.k, md, e0, e1);
        }
        std::printf("plans cached %zu, heuristic queries %zu\n", runner.plans(), runner.heuristic_queries());
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaFree(ws);
        cublasLtDestroy(handle);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cuda_gemm: %s\n", e.what());
        return 1;
    }
    return 0;
}
