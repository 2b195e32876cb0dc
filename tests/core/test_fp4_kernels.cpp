// The FP4 vector kernels of every ISA path this machine runs (kernels/cpu/simd.h) against
// cast_rules.h's scalar rules, bit for bit: the E2M1 fake cast (round to nearest and
// stochastic) on the edge values of the grid, a sweep over float32 and NaN blocks; the
// Philox rounding bits on unaligned and wrapping ranges; the block amaxes; the transposed
// random Hadamard transform on awkward shapes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_info.h"
#include "cpu/simd.h"
#include "fp8/cast_rules.h"

namespace fp8scope {
namespace {

std::vector<const simd::Kernels*> paths() {
    std::vector<const simd::Kernels*> out;
    for (Isa isa : {Isa::Generic, Isa::Avx2, Isa::Avx512})
        if (const simd::Kernels* k = simd::kernels_for(isa)) out.push_back(k);
    return out;
}

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// y values on and around the E2M1 grid's edges: the ties, the clamp, Inf, signed zeros,
// subnormals and NaN.
std::vector<float> edge_values() {
    std::vector<float> y;
    for (float t : {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 5.0f, 6.0f}) {
        for (float v : {t, std::nextafter(t, 0.0f), std::nextafter(t, kInf)}) {
            y.push_back(v);
            y.push_back(-v);
        }
    }
    for (float v : {0.0f, -0.0f, 6.0001f, -7.0f, 1e30f, kInf, -kInf, 1e-40f, -1e-45f, 1.17e-38f, 0.1f, 0.3f, 0.6f,
                    0.9f, 1.1f, 2.2f, 2.9f, 3.3f, 4.4f, 5.5f, 5.9f, 0.49f, std::numeric_limits<float>::max(), kNaN, -kNaN})
        y.push_back(v);
    return y;
}

// One row of blocks: x = y / enc per block (enc a power of two, so x * enc is y again),
// under varied (enc, scale, dec), one NaN block, a last block of 13 (short, odd).
struct Row {
    int block;
    std::vector<float> x, enc, scale;
    float dec;
};

Row edge_row(int block) {
    Row r{block, {}, {}, {}, 0.375f};
    const std::vector<float> y = edge_values();
    const float encs[] = {1.0f, 0.5f, 4.0f, 0x1p-20f};
    const float scales[] = {1.0f, 2.0f, 0.25f, 0x1p20f};
    std::size_t k = 0;
    for (int b = 0;; ++b) {
        const bool nan_block = b == 2;  // its elements are all NaN, the clamped ones not counted
        const float enc = encs[b % 4];
        r.enc.push_back(nan_block ? kNaN : enc);
        r.scale.push_back(nan_block ? kNaN : scales[b % 4]);
        const bool last = !nan_block && k + block >= y.size();
        const std::size_t len = last ? y.size() - k : std::size_t(block);
        for (std::size_t i = 0; i < len; ++i) r.x.push_back(y[nan_block ? i * 7 % y.size() : k++] / enc);
        if (last) break;
    }
    return r;
}

// The scalar rule element by element; `overflow` the clamped count outside NaN blocks.
std::vector<float> scalar_row(const Row& r, const std::uint32_t* rnd, std::int64_t& overflow) {
    std::vector<float> out(r.x.size());
    overflow = 0;
    for (std::size_t i = 0; i < r.x.size(); ++i) {
        const std::size_t b = i / std::size_t(r.block);
        if (std::isnan(r.scale[b])) {
            out[i] = r.scale[b];
            continue;
        }
        const cast::FP4BlockScale s{r.enc[b], r.scale[b], r.dec, 0};
        std::uint8_t code;
        std::uint32_t clamped;
        out[i] = rnd ? cast::fp4_qdq_sr(r.x[i], s, rnd[i], code, clamped) : cast::fp4_qdq(r.x[i], s, code, clamped);
        overflow += clamped;
    }
    return out;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int bad = 0;
    for (std::size_t i = 0; i < got.size() && bad < 5; ++i)
        if (bits(got[i]) != bits(want[i])) {
            ++bad;
            ADD_FAILURE() << what << " element " << i << ": got " << got[i] << " (0x" << std::hex << bits(got[i])
                          << "), want " << want[i] << " (0x" << bits(want[i]) << ")" << std::dec;
        }
}

TEST(Fp4Kernels, FakeRowEqualsTheScalarRuleOnEdgeValues) {
    for (const simd::Kernels* k : paths()) {
        for (int block : {16, 32}) {
            const Row r = edge_row(block);
            const std::int64_t n = std::int64_t(r.x.size());
            // Random bits with the extremes and the ones right at a tie's threshold.
            std::vector<std::uint32_t> rnd(r.x.size());
            std::uint32_t s = 12345;
            for (std::size_t i = 0; i < rnd.size(); ++i) {
                s = s * 1664525u + 1013904223u;
                rnd[i] = i % 7 == 0 ? 0u : i % 7 == 1 ? 0xFFFFFFFFu : i % 7 == 2 ? 0x80000000u : s;
            }
            for (const bool sr : {false, true}) {
                const std::string what = std::string(k->isa) + " block " + std::to_string(block) + (sr ? " sr" : " rn");
                std::int64_t want_overflow;
                const std::vector<float> want = scalar_row(r, sr ? rnd.data() : nullptr, want_overflow);
                EXPECT_GT(want_overflow, 0) << what;  // the clamp is exercised
                std::vector<float> got(r.x.size());
                const std::int64_t overflow = k->fp4_fake_row(r.x.data(), n, block, r.enc.data(), r.scale.data(), r.dec,
                                                              sr ? rnd.data() : nullptr, got.data());
                expect_same_bits(got, want, what);
                EXPECT_EQ(overflow, want_overflow) << what;
                // In place, as the cast runs.
                std::vector<float> inplace = r.x;
                k->fp4_fake_row(inplace.data(), n, block, r.enc.data(), r.scale.data(), r.dec, sr ? rnd.data() : nullptr,
                                inplace.data());
                expect_same_bits(inplace, want, what + " in place");
            }
        }
    }
}

TEST(Fp4Kernels, FakeRowEqualsTheScalarRuleOverASweepOfFloat32) {
    // Every 997th float32 bit pattern as y (enc = scale = dec = 1), in one long block.
    std::vector<float> x;
    for (std::uint64_t u = 0; u < (1ull << 32); u += 997) x.push_back(std::bit_cast<float>(std::uint32_t(u)));
    const std::int64_t n = std::int64_t(x.size());
    std::vector<std::uint32_t> rnd(x.size());
    for (std::size_t i = 0; i < rnd.size(); ++i) rnd[i] = std::uint32_t(i * 2654435761u);
    for (const simd::Kernels* k : paths()) {
        for (const bool sr : {false, true}) {
            // Blocks as long as the row: one scale, finite (NaN inputs stay in the sweep).
            const float one = 1.0f;
            std::vector<float> got(x.size());
            const std::int64_t overflow =
                k->fp4_fake_row(x.data(), n, int(n), &one, &one, 1.0f, sr ? rnd.data() : nullptr, got.data());
            std::int64_t want_overflow = 0;
            int bad = 0;
            for (std::size_t i = 0; i < x.size(); ++i) {
                std::uint8_t code;
                std::uint32_t clamped;
                const cast::FP4BlockScale s{1.0f, 1.0f, 1.0f, 0};
                const float want = sr ? cast::fp4_qdq_sr(x[i], s, rnd[i], code, clamped) : cast::fp4_qdq(x[i], s, code, clamped);
                want_overflow += clamped;
                if (bits(got[i]) != bits(want) && bad++ < 5)
                    ADD_FAILURE() << k->isa << (sr ? " sr" : " rn") << " y bits 0x" << std::hex << bits(x[i]) << ": got 0x"
                                  << bits(got[i]) << ", want 0x" << bits(want) << std::dec;
            }
            EXPECT_EQ(overflow, want_overflow) << k->isa;
        }
    }
}

TEST(Fp4Kernels, RoundingBitsArePhiloxOfEachElement) {
    const cast::RoundingKey key{0x123456789ABCull, 0xFEDCBA9876ull, 0x2Bu};
    const simd::PhiloxKey philox{key.tensor, std::uint32_t(key.step), std::uint32_t(key.step >> 32),
                                 std::uint32_t(key.seed), std::uint32_t(key.seed >> 32)};
    // Unaligned starts and ends, short runs, and counters that wrap past 2^32.
    const std::pair<std::uint64_t, std::int64_t> runs[] = {{0, 1}, {1001, 37}, {3, 300}, {4, 256}, {(1ull << 34) - 45, 131}};
    for (const simd::Kernels* k : paths()) {
        for (const auto& [e0, n] : runs) {
            std::vector<std::uint32_t> got(std::size_t(n) + 1, 0xDEADBEEFu);
            k->rounding_bits(philox, e0, n, got.data());
            for (std::int64_t i = 0; i < n; ++i)
                ASSERT_EQ(got[std::size_t(i)], cast::rounding_bits(key, e0 + std::uint64_t(i))) << k->isa << " e " << e0 + i;
            EXPECT_EQ(got[std::size_t(n)], 0xDEADBEEFu) << k->isa << ": nothing past the end";
        }
    }
}

TEST(Fp4Kernels, BlockAmaxIsTheLargestMagnitudeWithNaNAboveInf) {
    std::vector<float> x(75);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 23) - 11) * 0.37f;
    x[5] = -kInf;   // block 0 of 16: Inf
    x[40] = -kNaN;  // block 2: NaN
    x[70] = -9.5f;  // the short last block
    for (const simd::Kernels* k : paths()) {
        for (int block : {16, 32}) {
            const std::size_t blocks = (x.size() + block - 1) / block;
            std::vector<std::uint32_t> got(blocks, 0), want(blocks, 0);
            k->block_amax(x.data(), std::int64_t(x.size()), block, got.data());
            k->block_amax(x.data(), std::int64_t(x.size()), block, got.data());  // max-accumulates: the same
            for (std::size_t i = 0; i < x.size(); ++i)
                want[i / block] = std::max(want[i / block], bits(x[i]) & ~cast::kSignBit);
            EXPECT_EQ(got, want) << k->isa << " block " << block;
        }
        std::uint32_t one[1] = {bits(100.0f)};  // accumulates onto what is there
        k->block_amax(x.data(), 4, 16, one);
        EXPECT_EQ(one[0], bits(100.0f)) << k->isa;
    }
}

TEST(Fp4Kernels, RhtTransposeIsTheTransposeWithRht16AlongItsRows) {
    struct Shape {
        std::int64_t rows, cols;
    };
    for (const Shape s : {Shape{37, 29}, Shape{16, 64}, Shape{48, 3}, Shape{5, 40}}) {
        std::vector<float> x(std::size_t(s.rows * s.cols));
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(float(i) * 0.7f) * float(1 + i % 9);
        x[7] = 1e-40f;
        x[std::size_t(s.cols + 2)] = kInf;  // Inf counts in the amax
        if (x.size() > 100) x[100] = kNaN;  // NaN does not
        for (const bool rht : {false, true}) {
            // The oracle: the plain transpose, then rht16 on each row's full 16-blocks.
            std::vector<float> want(x.size());
            for (std::int64_t r = 0; r < s.rows; ++r)
                for (std::int64_t c = 0; c < s.cols; ++c) want[std::size_t(c * s.rows + r)] = x[std::size_t(r * s.cols + c)];
            if (rht)
                for (std::int64_t c = 0; c < s.cols; ++c)
                    for (std::int64_t r = 0; r + 16 <= s.rows; r += 16) cast::rht16(want.data() + c * s.rows + r);
            std::uint32_t want_amax = 0;
            for (float v : want)
                if ((bits(v) & ~cast::kSignBit) <= cast::kInfBits) want_amax = std::max(want_amax, bits(v) & ~cast::kSignBit);
            for (const simd::Kernels* k : paths()) {
                std::vector<float> got(x.size(), -1.0f);
                std::uint32_t amax = 0;
                for (std::int64_t r0 = 0; r0 < s.rows; r0 += 16)
                    amax = std::max(amax, k->rht_transpose(got.data(), x.data(), s.rows, s.cols, r0,
                                                           std::min(s.rows, r0 + 16), rht));
                const std::string what = std::string(k->isa) + " " + std::to_string(s.rows) + "x" +
                                         std::to_string(s.cols) + (rht ? " rht" : "");
                expect_same_bits(got, want, what);
                EXPECT_EQ(amax, want_amax) << what;
            }
        }
    }
}

}  // namespace
}  // namespace fp8scope
