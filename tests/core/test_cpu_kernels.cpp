// The CPU's vector kernels (kernels/cpu/simd.h): every ISA path this machine can run gives
// bitwise the results of the portable one, on awkward lengths and data (NaN, Inf,
// subnormals, ties, values past max); and the one-pass cast-transpose of 1 x B recipes
// gives exactly fake_quantize() of x and of x^T, on awkward shapes and thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "cpu/cpu_backend.h"
#include "cpu/cpu_info.h"
#include "cpu/quantize.h"
#include "cpu/simd.h"
#include "fp8/cast_rules.h"
#include "reference/reference.h"

namespace fp8scope {
namespace {

using ref::DataKind;

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

// Gaussian values at mixed exponents with the cases the cast must get right scattered in.
std::vector<float> awkward(std::int64_t n, unsigned seed) {
    std::vector<float> x = ref::make_data(DataKind::MixedZeros, 1, n, seed);
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e-40f, -3e-45f, 448.0f,
                              464.0f, -57344.0f, 61440.0f, 0x1p-9f * 1.5f, 0x1p-16f * 2.5f, 3.4e38f};
    for (std::int64_t i = 0; i < n; ++i)
        if ((i * 7 + seed) % 11 == 0) x[std::size_t(i)] = specials[(i + seed) % std::size(specials)];
    return x;
}

std::vector<const simd::Kernels*> wider_paths() {
    std::vector<const simd::Kernels*> out;
    for (Isa isa : {Isa::Avx2, Isa::Avx512})
        if (const simd::Kernels* k = simd::kernels_for(isa)) out.push_back(k);
    return out;
}

const simd::Kernels& portable() { return *simd::kernels_for(Isa::Generic); }

#if defined(__x86_64__)
// The widest path this CPU runs, from CPUID and XGETBV read here, apart from cpu_info.cpp's
// __builtin_cpu_supports: AVX2 wants AVX2 FMA BMI2 and the OS saving the YMM registers;
// AVX-512 wants F BW CD DQ VL besides, and the OS saving the ZMM and mask registers.
Isa isa_from_cpuid() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return Isa::Generic;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
    if (!osxsave || !avx) return Isa::Generic;
    unsigned lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    const bool ymm_saved = (lo & 0x6u) == 0x6u, zmm_saved = (lo & 0xe6u) == 0xe6u;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return Isa::Generic;
    const auto has = [&](int bit) { return (b >> bit) & 1u; };
    if (!(ymm_saved && fma && has(5) && has(8))) return Isa::Generic;  // avx2, bmi2
    if (zmm_saved && has(16) && has(17) && has(28) && has(30) && has(31)) return Isa::Avx512;  // f dq cd bw vl
    return Isa::Avx2;
}
#else
Isa isa_from_cpuid() { return Isa::Generic; }  // arm64 builds have the portable path only
#endif

// FP8SCOPE_CPU_ISA lowers the choice (cpu_info.h); the runs of this test may set it.
Isa expected_isa() {
    Isa isa = isa_from_cpuid();
    const char* want = std::getenv("FP8SCOPE_CPU_ISA");
    const std::string w = want ? want : "";
    if (w == "generic") isa = Isa::Generic;
    if (w == "avx2" && isa == Isa::Avx512) isa = Isa::Avx2;
    return isa;
}

// The dispatcher takes the widest path the CPU runs: not one it cannot (a crash on an
// older CPU), not a narrower one (half the speed for nothing). An x86-64 build compiles
// every path, so the choice is the CPU's alone.
TEST(SimdKernels, ChosenPathIsTheWidestThisMachineRuns) {
    const Isa want = expected_isa();
    EXPECT_STREQ(simd::kernels().isa, isa_name(want)) << "cpu features: " << cpu_features();
    EXPECT_EQ(cpu_isa(), want);
    // Paths past the CPU's are refused; the ones up to it are offered.
    EXPECT_EQ(simd::kernels_for(Isa::Avx512) != nullptr, want == Isa::Avx512);
    EXPECT_EQ(simd::kernels_for(Isa::Avx2) != nullptr, want != Isa::Generic);
    ASSERT_NE(simd::kernels_for(Isa::Generic), nullptr);
    EXPECT_STREQ(simd::kernels_for(Isa::Generic)->isa, "generic");
}

TEST(SimdKernels, CastAndAmaxMatchThePortablePath) {
    const simd::Kernels& g = portable();
    for (const simd::Kernels* k : wider_paths()) {
        for (std::int64_t n : {0, 1, 7, 8, 15, 16, 17, 31, 33, 100, 257}) {
            const std::vector<float> x = awkward(n, unsigned(n));
            bool nf_g = false, nf_k = true;
            EXPECT_EQ(k->amax(x.data(), n, &nf_k), g.amax(x.data(), n, &nf_g)) << k->isa << " n=" << n;
            EXPECT_EQ(nf_k, nf_g);
            for (float s : {1.0f, 448.0f / 3.0f, 0x1p-20f, 0x1p40f, std::numeric_limits<float>::quiet_NaN()}) {
                for (int f : {0, 1}) {
                    std::vector<float> out_g(static_cast<std::size_t>(n)), out_k(static_cast<std::size_t>(n));
                    const float si = 1.0f / s;
                    EXPECT_EQ(k->fake[f](x.data(), n, s, si, out_k.data()), g.fake[f](x.data(), n, s, si, out_g.data()));
                    for (std::int64_t i = 0; i < n; ++i)
                        ASSERT_TRUE(same_bits(out_k[std::size_t(i)], out_g[std::size_t(i)]))
                            << k->isa << " fake f=" << f << " s=" << s << " at " << i << ": " << x[std::size_t(i)];
                    std::uint32_t m_g = 1, m_k = 2;
                    EXPECT_EQ(k->fake_amax[f](x.data(), n, s, si, out_k.data(), &m_k),
                              g.fake_amax[f](x.data(), n, s, si, out_g.data(), &m_g));
                    EXPECT_EQ(m_k, m_g);
                    EXPECT_EQ(m_g, g.amax(x.data(), n, &nf_g));
                }
            }
        }
    }
}

// Every path's cast against cast_rules.h's scalar one (the tested oracle of test_cast.cpp):
// float32 bit patterns strided over the whole range, and every FP8 value, every midpoint
// between neighbouring values (the ties) and the floats beside them.
TEST(SimdKernels, CastMatchesTheScalarCast) {
    for (Format fmt : {Format::E4M3, Format::E5M2}) {
        std::vector<float> x;
        for (std::uint64_t u = 0; u < (std::uint64_t(1) << 32); u += 4093) x.push_back(std::bit_cast<float>(std::uint32_t(u)));
        std::vector<float> values;
        for (int code = 0; code < 256; ++code)
            if (is_finite_code(fmt, std::uint8_t(code))) values.push_back(decode(fmt, std::uint8_t(code)));
        std::sort(values.begin(), values.end());
        for (std::size_t i = 0; i + 1 < values.size(); ++i) {
            const float mid = float((double(values[i]) + double(values[i + 1])) / 2);
            for (float v : {values[i], mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) x.push_back(v);
        }
        const std::int64_t n = std::int64_t(x.size());
        const int f = simd::format_index(fmt == Format::E5M2);
        std::vector<float> want(x.size());
        for (std::size_t i = 0; i < x.size(); ++i)
            want[i] = fmt == Format::E4M3 ? cast::round_sat<Format::E4M3>(x[i]) : cast::round_sat<Format::E5M2>(x[i]);
        std::vector<const simd::Kernels*> paths = wider_paths();
        paths.push_back(&portable());
        for (const simd::Kernels* k : paths) {
            std::vector<float> got(x.size());
            k->fake[f](x.data(), n, 1.0f, 1.0f, got.data());
            // NaN in, NaN out (the multiply by the scale quiets a signaling NaN).
            for (std::size_t i = 0; i < x.size(); ++i)
                ASSERT_TRUE(same_bits(got[i], want[i]) || (std::isnan(got[i]) && std::isnan(x[i])))
                    << k->isa << " " << name(fmt) << " x=" << x[i] << " bits " << std::bit_cast<std::uint32_t>(x[i]);
        }
    }
}

TEST(SimdKernels, TilesMatchThePortablePath) {
    const simd::Kernels& g = portable();
    for (const simd::Kernels* k : wider_paths()) {
        for (auto [nr, nc] : {std::pair{1, 1}, {3, 17}, {32, 32}, {17, 128}, {128, 128}, {128, 9}, {40, 100}}) {
            const std::int64_t ld = nc + 5;
            const std::vector<float> x = awkward(nr * ld, unsigned(nr * 131 + nc));
            std::vector<float> xt_g(std::size_t(nr * nc)), xt_k(xt_g.size());
            const simd::Tile tg{x.data(), ld, nr, nc, xt_g.data()}, tk{x.data(), ld, nr, nc, xt_k.data()};
            std::uint32_t ra_g[128], ca_g[128], ra_k[128], ca_k[128];
            std::uint8_t rn_g[128], cn_g[128], rn_k[128], cn_k[128];
            g.tile_amax(tg, ra_g, rn_g, ca_g, cn_g);
            k->tile_amax(tk, ra_k, rn_k, ca_k, cn_k);
            EXPECT_EQ(0, std::memcmp(ra_g, ra_k, sizeof(std::uint32_t) * std::size_t(nr))) << k->isa;
            EXPECT_EQ(0, std::memcmp(rn_g, rn_k, std::size_t(nr))) << k->isa;
            EXPECT_EQ(0, std::memcmp(ca_g, ca_k, sizeof(std::uint32_t) * std::size_t(nc))) << k->isa;
            EXPECT_EQ(0, std::memcmp(cn_g, cn_k, std::size_t(nc))) << k->isa;
            EXPECT_EQ(0, std::memcmp(xt_g.data(), xt_k.data(), xt_g.size() * sizeof(float))) << k->isa;
            for (int r = 0; r < nr; ++r) {  // the row amaxes are those of the rows
                bool nf = false;
                EXPECT_EQ(ra_g[r], g.amax(x.data() + r * ld, nc, &nf));
                EXPECT_EQ(rn_g[r], nf);
            }
            // Scales of every kind: powers of two, arbitrary, NaN (an MX block with NaN/Inf).
            const std::size_t rows = static_cast<std::size_t>(nr), cols = static_cast<std::size_t>(nc);
            std::vector<float> s_row(rows), si_row(rows), s_col(cols), si_col(cols);
            for (int i = 0; i < nr; ++i) s_row[std::size_t(i)] = i % 5 == 4 ? std::nanf("") : std::ldexp(1.3f, i % 9 - 4);
            for (int i = 0; i < nc; ++i) s_col[std::size_t(i)] = i % 7 == 6 ? std::nanf("") : std::ldexp(0.7f, i % 11 - 5);
            for (std::size_t i = 0; i < s_row.size(); ++i) si_row[i] = 1.0f / s_row[i];
            for (std::size_t i = 0; i < s_col.size(); ++i) si_col[i] = 1.0f / s_col[i];
            for (int f : {0, 1}) {
                std::vector<float> row_g(std::size_t(nr * nc)), col_g(row_g.size()), row_k(row_g.size()),
                    col_k(row_g.size());
                const simd::TileCast cg{s_row.data(), si_row.data(), s_col.data(), si_col.data(), row_g.data(), nc,
                                        col_g.data(), nr};
                const simd::TileCast ck{s_row.data(), si_row.data(), s_col.data(), si_col.data(), row_k.data(), nc,
                                        col_k.data(), nr};
                EXPECT_EQ(k->tile_cast[f](tk, ck), g.tile_cast[f](tg, cg)) << k->isa;
                for (std::size_t i = 0; i < row_g.size(); ++i) {
                    ASSERT_TRUE(same_bits(row_g[i], row_k[i])) << k->isa << " rowwise at " << i;
                    ASSERT_TRUE(same_bits(col_g[i], col_k[i])) << k->isa << " columnwise at " << i;
                }
            }
        }
    }
}

TEST(SimdKernels, AnalysisSumsMatchThePortablePath) {
    const simd::Kernels& g = portable();
    for (const simd::Kernels* k : wider_paths()) {
        simd::MomentSums mg, mk;
        simd::CentralSums cg, ck;
        simd::ErrorSums eg[2], ek[2];
        // Several calls into the same accumulators, as the analysis makes them.
        for (std::int64_t n : {0, 5, 16, 37, 128, 1000}) {
            const std::vector<float> x = awkward(n, unsigned(n + 3));
            g.moment_sums(x.data(), n, mg);
            k->moment_sums(x.data(), n, mk);
            EXPECT_EQ(k->central_sums(x.data(), n, 0.25, 1.5, ck), g.central_sums(x.data(), n, 0.25, 1.5, cg));
            for (int f : {0, 1}) {
                g.error_sums[f](x.data(), n, 3.0f, 1.0f / 3.0f, eg[f]);
                k->error_sums[f](x.data(), n, 3.0f, 1.0f / 3.0f, ek[f]);
            }
        }
        EXPECT_EQ(0, std::memcmp(mg.sum, mk.sum, sizeof mg.sum)) << k->isa;
        EXPECT_EQ(0, std::memcmp(mg.sum2, mk.sum2, sizeof mg.sum2));
        EXPECT_EQ(mg.amax, mk.amax);
        EXPECT_EQ(mg.amax_finite, mk.amax_finite);
        EXPECT_EQ(mg.nan, mk.nan);
        EXPECT_EQ(mg.inf, mk.inf);
        EXPECT_EQ(0, std::memcmp(cg.m2, ck.m2, sizeof cg.m2));
        EXPECT_EQ(0, std::memcmp(cg.m4, ck.m4, sizeof cg.m4));
        EXPECT_EQ(cg.beyond, ck.beyond);
        EXPECT_EQ(cg.min_nz, ck.min_nz);
        for (int f : {0, 1}) {
            EXPECT_EQ(0, std::memcmp(eg[f].sxx, ek[f].sxx, sizeof eg[f].sxx)) << k->isa << " f=" << f;
            EXPECT_EQ(0, std::memcmp(eg[f].sdd, ek[f].sdd, sizeof eg[f].sdd));
            EXPECT_EQ(0, std::memcmp(eg[f].sqq, ek[f].sqq, sizeof eg[f].sqq));
            EXPECT_EQ(0, std::memcmp(eg[f].sxq, ek[f].sxq, sizeof eg[f].sxq));
            EXPECT_EQ(0, std::memcmp(eg[f].max_err, ek[f].max_err, sizeof eg[f].max_err));
            EXPECT_EQ(eg[f].underflow, ek[f].underflow);
            EXPECT_EQ(eg[f].overflow, ek[f].overflow);
            EXPECT_EQ(eg[f].nonfinite_out, ek[f].nonfinite_out);
        }
    }
}

TEST(SimdKernels, TransposeMatchesThePortablePath) {
    for (const simd::Kernels* k : wider_paths()) {
        const std::int64_t rows = 37, cols = 70;
        const std::vector<float> x = awkward(rows * cols, 5);
        std::vector<float> a(x.size(), 0.0f), b(x.size(), 0.0f);
        portable().transpose_block(a.data(), rows, x.data(), cols, 0, rows, 0, cols);
        k->transpose_block(b.data(), rows, x.data(), cols, 0, rows, 0, cols);
        for (std::size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(same_bits(a[i], b[i])) << k->isa << " at " << i;
        EXPECT_TRUE(same_bits(a[std::size_t(3 * rows + 2)], x[std::size_t(2 * cols + 3)]));
    }
}

// ---- the cast-transpose of 1 x B recipes -------------------------------------------------

struct Case {
    std::int64_t rows, cols;
    DataKind kind;
};

class CastTranspose : public ::testing::TestWithParam<Case> {};

TEST_P(CastTranspose, EqualsTheCastsOfXAndItsTranspose) {
    const Case c = GetParam();
    const std::vector<float> x = ref::make_data(c.kind, c.rows, c.cols, 17);
    std::vector<float> xt(x.size());
    for (std::int64_t r = 0; r < c.rows; ++r)
        for (std::int64_t k = 0; k < c.cols; ++k) xt[std::size_t(k * c.rows + r)] = x[std::size_t(r * c.cols + k)];
    const MatrixView v{x.data(), c.rows, c.cols}, vt{xt.data(), c.cols, c.rows};
    const Recipe recipes[] = {BlockScaling{Format::E4M3, 1, 128, true}, BlockScaling{Format::E5M2, 1, 128, false},
                              BlockScaling{Format::E4M3, 1, 40, false}, MXScaling{Format::E4M3, MXRule::RCeil, 32},
                              MXScaling{Format::E5M2, MXRule::Floor, 32}, MXScaling{Format::E4M3, MXRule::RCeil, 16}};
    for (const Recipe& r : recipes) {
        ASSERT_TRUE(has_cast_transpose(r));
        std::vector<float> want_row(x.size()), want_col(x.size());
        const CastInfo want = fake_quantize(v, r, want_row.data());
        fake_quantize(vt, r, want_col.data());
        for (int threads : {1, 3}) {
            std::vector<float> row(x.size(), 1.0f), col(x.size(), 1.0f);
            const CastInfo got = fake_quantize_transposed(v, r, row.data(), col.data(), threads);
            EXPECT_TRUE(same_bits(got.amax, want.amax)) << recipe_name(r);
            EXPECT_EQ(got.overflow, want.overflow) << recipe_name(r);
            EXPECT_TRUE(std::isnan(got.scale));
            for (std::size_t i = 0; i < x.size(); ++i) {
                ASSERT_TRUE(same_bits(row[i], want_row[i]) || (std::isnan(row[i]) && std::isnan(want_row[i])))
                    << recipe_name(r) << " rowwise at " << i << ": " << row[i] << " vs " << want_row[i];
                ASSERT_TRUE(same_bits(col[i], want_col[i]) || (std::isnan(col[i]) && std::isnan(want_col[i])))
                    << recipe_name(r) << " columnwise at " << i << ": " << col[i] << " vs " << want_col[i];
            }
        }
    }
    EXPECT_FALSE(has_cast_transpose(BlockScaling{Format::E4M3, 128, 128, true}));
    EXPECT_FALSE(has_cast_transpose(CurrentScaling{}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, CastTranspose,
                         ::testing::Values(Case{1, 16, DataKind::Gaussian}, Case{217, 256, DataKind::OutlierColumns},
                                           Case{33, 130, DataKind::NonFinite}, Case{128, 128, DataKind::Tiny},
                                           Case{300, 97, DataKind::MixedZeros}, Case{5, 1, DataKind::Gaussian},
                                           Case{256, 768, DataKind::NonFinite}),
                         [](const auto& info) {
                             return std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols) + "_" +
                                    ref::data_kind_name(info.param.kind);
                         });

// The backend's cast of an MX operand for training (both copies) matches the two casts.
TEST(CastTranspose, BackendCastGivesBothCopies) {
    CpuBackend cpu(2);
    const std::int64_t rows = 64, cols = 96;
    std::vector<float> x = ref::make_data(DataKind::Gaussian, rows, cols, 3);
    const Recipe r = MXScaling{Format::E4M3, MXRule::RCeil, 32};
    auto storage = cpu.make_operand_storage();
    CastSpec spec;
    spec.recipe = &r;
    spec.columnwise = true;
    CastInfo report;
    spec.report = &report;
    const GemmOperand op = cpu.cast(TensorDesc::of(x.data(), rows, cols, Device::CPU), spec, *storage);
    ASSERT_EQ(op.columnwise.rows, cols);
    ASSERT_EQ(op.columnwise.cols, rows);
    std::vector<float> want(x.size());
    fake_quantize(MatrixView{x.data(), rows, cols}, r, want.data());
    EXPECT_EQ(0, std::memcmp(op.rowwise.data, want.data(), want.size() * sizeof(float)));
    std::vector<float> xt(x.size());
    for (std::int64_t i = 0; i < rows; ++i)
        for (std::int64_t k = 0; k < cols; ++k) xt[std::size_t(k * rows + i)] = x[std::size_t(i * cols + k)];
    fake_quantize(MatrixView{xt.data(), cols, rows}, r, want.data());
    EXPECT_EQ(0, std::memcmp(op.columnwise.data, want.data(), want.size() * sizeof(float)));
    EXPECT_GT(report.amax, 0.0f);
}

}  // namespace
}  // namespace fp8scope
