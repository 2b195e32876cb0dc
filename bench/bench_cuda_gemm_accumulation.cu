// FP8 GEMM accumulation on the GPU: the output error of a per-tensor E4M3 GEMM
// (cuBLASLt, the project's GemmRunner) with fast accumulation on
// (CUBLASLT_MATMUL_DESC_FAST_ACCUM = 1: one tensor-core accumulator all along k) and off
// (partial sums promoted into float32), against a float64 GEMM of the same dequantized
// operands, for k = 256 .. 16384. The operands' own quantization error is not in the
// figures: only what the GEMM's accumulation adds (DeepSeek-V3 reports ~2% relative
// error at k = 4096 without promotion on H800). float32 output, so no output rounding.
//
// Data: N(0,1) ("signed", sums grow like sqrt(k)) and |N(0,1)| ("same sign", as after a
// GELU: sums grow like k, where a short accumulator loses most), with an outlier one in a
// thousand (x50), each operand scaled per tensor to E4M3's range (amax -> 448).
//
//   bench_cuda_gemm_accumulation [m n]     (default 256 256)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda/gemm/gemm.h"
#include "cuda/runtime/check.h"
#include "fp8/format.h"

namespace fp8scope::bench {
namespace {

struct Operand {
    std::vector<std::uint8_t> codes;
    std::vector<float> values;  // the dequantized operand: codes times scale_inv
    float scale_inv = 1;
};

Operand make_operand(std::int64_t rows, std::int64_t k, bool same_sign, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::uniform_int_distribution<int> one_in(0, 999);
    std::vector<float> x(std::size_t(rows * k));
    float amax = 0;
    for (float& v : x) {
        v = normal(rng) * (one_in(rng) == 0 ? 50.0f : 1.0f);
        if (same_sign) v = std::fabs(v);
        amax = std::max(amax, std::fabs(v));
    }
    Operand o;
    const float scale = fp8_max(Format::E4M3) / amax;
    o.scale_inv = 1.0f / scale;
    o.codes.resize(x.size());
    o.values.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        o.codes[i] = encode(Format::E4M3, x[i] * scale);
        o.values[i] = decode(Format::E4M3, o.codes[i]) * o.scale_inv;
    }
    return o;
}

template <class T>
T* upload(const std::vector<T>& v) {
    T* d = nullptr;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&d, v.size() * sizeof(T)));
    FP8SCOPE_CUDA_CHECK(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

struct Error {
    double rel_l2 = 0, max_rel = 0;  // ||d|| / ||ref||, max |d| / max |ref|
};

Error error_of(const std::vector<float>& out, const std::vector<double>& ref) {
    double e = 0, s = 0, dmax = 0, rmax = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = out[i] - ref[i];
        e += d * d;
        s += ref[i] * ref[i];
        dmax = std::max(dmax, std::fabs(d));
        rmax = std::max(rmax, std::fabs(ref[i]));
    }
    return {std::sqrt(e / s), dmax / rmax};
}

void run(std::int64_t m, std::int64_t n, bool same_sign) {
    std::printf("\n%s operands, m = %lld, n = %lld (E4M3 per tensor, float32 out)\n",
                same_sign ? "same-sign |N(0,1)|" : "signed N(0,1)", (long long)m, (long long)n);
    std::printf("%7s  %13s %13s  %13s %13s\n", "k", "fast rel L2", "fast max rel", "promoted L2", "promoted max");
    cuda::GemmRunner runner;
    for (std::int64_t k = 256; k <= 16384; k *= 2) {
        const Operand a = make_operand(m, k, same_sign, 11u + std::uint32_t(k)),
                      b = make_operand(n, k, same_sign, 23u + std::uint32_t(k));
        std::vector<double> ref(std::size_t(m * n));
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double s = 0;
                const float* ar = &a.values[std::size_t(i * k)];
                const float* br = &b.values[std::size_t(j * k)];
                for (std::int64_t p = 0; p < k; ++p) s += double(ar[p]) * br[p];
                ref[std::size_t(i * n + j)] = s;
            }
        std::uint8_t* da = upload(a.codes);
        std::uint8_t* db = upload(b.codes);
        float* sa = upload(std::vector<float>{a.scale_inv});
        float* sb = upload(std::vector<float>{b.scale_inv});
        float* out = nullptr;
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&out, std::size_t(m * n) * sizeof(float)));
        Error e[2];
        for (int fast = 0; fast < 2; ++fast) {
            cuda::GemmArgs g;
            g.m = m, g.n = n, g.k = k;
            g.a = {da, DType::E4M3, cuda::GemmScaling::PerTensor, sa};
            g.b = {db, DType::E4M3, cuda::GemmScaling::PerTensor, sb};
            g.out = out;
            g.out_dtype = DType::F32;
            g.fast_accum = fast == 1;
            runner.gemm(g);
            FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(runner.stream()));
            std::vector<float> host(ref.size());
            FP8SCOPE_CUDA_CHECK(cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
            e[fast] = error_of(host, ref);
        }
        std::printf("%7lld  %13.3e %13.3e  %13.3e %13.3e\n", (long long)k, e[1].rel_l2, e[1].max_rel, e[0].rel_l2,
                    e[0].max_rel);
        for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(sa),
                        static_cast<void*>(sb), static_cast<void*>(out)})
            FP8SCOPE_CUDA_CHECK(cudaFree(p));
    }
}

}  // namespace
}  // namespace fp8scope::bench

int main(int argc, char** argv) {
    const std::int64_t m = argc > 2 ? std::atoll(argv[1]) : 256, n = argc > 2 ? std::atoll(argv[2]) : 256;
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::fprintf(stderr, "bench_cuda_gemm_accumulation: no CUDA device\n");
        return 1;
    }
    cudaDeviceProp p{};
    FP8SCOPE_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    std::printf("%s: FP8 GEMM output error against float64, fast accumulation on vs promoted\n", p.name);
    fp8scope::bench::run(m, n, false);
    fp8scope::bench::run(m, n, true);
    return 0;
}
