// Throughput of the CPU's FP4 training casts next to its FP8 casts, on one float32 tensor:
// the dequantized copies the CPU backend feeds its GEMMs. Prints the CPU, the vector path
// the kernels run (simd.h) and, per cast, the best wall time and GB/s counting the float32
// read and the float32 written of each copy.
//   bench_fp4_cast [rows (default 4096)] [cols (default 4096)] [threads (default 1)] [repeats (default 5)]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "cpu/cpu_info.h"
#include "cpu/fp4.h"
#include "cpu/quantize.h"
#include "cpu/simd.h"
#include "fp8/recipe.h"

using namespace fp8scope;

namespace {

double best_seconds(int repeats, const std::function<void()>& f) {
    double best = 1e30;
    for (int i = 0; i < repeats; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    const std::int64_t rows = argc > 1 ? std::atoll(argv[1]) : 4096, cols = argc > 2 ? std::atoll(argv[2]) : 4096;
    const int threads = argc > 3 ? std::atoi(argv[3]) : 1, repeats = argc > 4 ? std::atoi(argv[4]) : 5;
    const std::int64_t n = rows * cols;
    const auto size = static_cast<std::size_t>(n);
    std::vector<float> x(size), a(size), b(size);
    std::uint32_t s = 1;
    for (float& v : x) {  // roughly Gaussian: a sum of four uniforms
        float u = 0;
        for (int k = 0; k < 4; ++k) u += float((s = s * 1664525u + 1013904223u) >> 8) * 0x1p-24f;
        v = (u - 2.0f) * 1.7f;
    }
    const MatrixView v{x.data(), rows, cols};
    std::printf("CPU: %s\nkernels: %s\ntensor %lld x %lld float32, %d thread(s), best of %d\n", cpu_model().c_str(),
                simd::kernels().isa, (long long)rows, (long long)cols, threads, repeats);

    struct Case {
        const char* name;
        int copies;  // float32 copies written (and reads of x, one per copy)
        std::function<void()> run;
    };
    const cast::RoundingKey key{7, 3, 2};
    const Recipe current = parse_recipe("current_e4m3"), mxfp8 = parse_recipe("mxfp8_e4m3_rceil");
    const Recipe nvfp4 = parse_recipe("nvfp4"), nvfp4_rht_sr = parse_recipe("nvfp4:rht=1:sr=1");
    const Recipe nvfp4_2d = parse_recipe("nvfp4_2d"), mxfp4 = parse_recipe("mxfp4_rceil");
    const std::vector<Case> cases = {
        {"fp8 current (E4M3 per tensor)", 1, [&] { fake_quantize(v, current, a.data(), nullptr, threads); }},
        {"fp8 mxfp8 rowwise", 1, [&] { fake_quantize(v, mxfp8, a.data(), nullptr, threads); }},
        {"fp8 mxfp8 both copies", 2, [&] { fake_quantize_transposed(v, mxfp8, a.data(), b.data(), threads); }},
        {"fp4 nvfp4 1x16 rowwise", 1, [&] { fp4_fake_quantize(v, nvfp4, a.data(), {}, threads); }},
        {"fp4 nvfp4 16x16 tiles", 1, [&] { fp4_fake_quantize(v, nvfp4_2d, a.data(), {}, threads); }},
        {"fp4 nvfp4 1x16 rowwise sr", 1,
         [&] { fp4_fake_quantize(v, parse_recipe("nvfp4:sr=1"), a.data(), key, threads); }},
        {"fp4 nvfp4 columnwise (x^T, rht)", 1,
         [&] { fp4_fake_quantize_transposed(v, parse_recipe("nvfp4:rht=1"), b.data(), key, threads); }},
        {"fp4 nvfp4 columnwise (x^T, rht, sr)", 1,
         [&] { fp4_fake_quantize_transposed(v, nvfp4_rht_sr, b.data(), key, threads); }},
        {"fp4 mxfp4 rowwise", 1, [&] { fp4_fake_quantize(v, mxfp4, a.data(), {}, threads); }},
        {"fp4 nvfp4 codes (quantize_fp4, scalar reference)", 1, [&] { quantize_fp4(v, nvfp4, threads); }},
    };
    std::printf("%-50s %10s %10s %8s\n", "cast", "ms", "GB/s", "ns/elem");
    for (const Case& c : cases) {
        const double t = best_seconds(repeats, c.run);
        const double bytes = double(n) * 8.0 * c.copies;
        std::printf("%-50s %10.2f %10.2f %8.3f\n", c.name, t * 1e3, bytes / t * 1e-9, t * 1e9 / double(n * c.copies));
    }
    return 0;
}
