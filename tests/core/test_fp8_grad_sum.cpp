// FP8 gradient sums (engine/fp8_grad_sum.h) on CPU ranks over TCP, 2 and 3 ranks as
// threads, against an oracle in double built on format.cpp's encode() from the rules as
// written (support/chunk_oracle.h): every rank ends with the oracle's bits; NaN and Inf
// stay non-finite; zero buckets, buckets that do not divide by the ranks and buckets with
// fewer gradients than ranks.
//
// The shares hold magnitudes in [2^-8, 1] (and zeros), so every dequantized value is a
// multiple of 2^-12 below 2^2: the float32 sums the ranks take in rank order are exact,
// and equal the oracle's double sums (checked), so the expected bits are one number.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/fp8_grad_sum.h"
#include "engine/fp8_grad_sum_error.h"
#include "io/half.h"
#include "support/chunk_oracle.h"
#include "support/data_parallel_job.h"

namespace fp8scope {
namespace {

using testing::chunk_amax;
using testing::chunk_scale;
using testing::chunk_value;
using testing::Rank;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> share(std::int64_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (auto& v : x)
        v = u(rng) < 0.05 ? 0.0f : static_cast<float>(std::exp2(-8 * u(rng)) * (u(rng) < 0.5 ? -1 : 1));
    return x;
}

struct Sums {
    std::vector<std::vector<float>> ranks;  // every rank's gradients after the sum
    std::int64_t bytes = 0;                 // rank 0's FP8 form
};

Sums fp8_sums(const std::vector<std::vector<float>>& shares, Format f) {
    const int world = int(shares.size());
    Sums out;
    out.ranks.resize(shares.size());
    testing::run_ranks(world, "cpu", 1, [&](Rank& r) {
        const std::size_t k = std::size_t(r.env.rank), n = shares[k].size();
        Fp8GradSum sum(*r.backend, *r.comm, f, n);
        DeviceBuffer<float> grads(*r.backend, n);
        r.backend->copy_from_host(grads.data(), shares[k].data(), n * sizeof(float));
        const std::int64_t bytes = sum.sum(grads.data(), std::int64_t(n));
        r.comm->synchronize();
        out.ranks[k].resize(n);
        r.backend->copy_to_host(out.ranks[k].data(), grads.data(), n * sizeof(float));
        if (k == 0) out.bytes = bytes;
    });
    return out;
}

// The sums as the rules read: chunk j of every share cast with its sender's scale,
// dequantized and added, the sum cast with the scale of its own amax and dequantized.
std::vector<double> oracle(const std::vector<std::vector<float>>& shares, Format f) {
    const int world = int(shares.size());
    const ChunkLayout l{std::int64_t(shares[0].size()), world};
    std::vector<double> out(shares[0].size());
    for (int j = 0; j < world; ++j) {
        const std::size_t b = std::size_t(l.begin(j)), n = std::size_t(l.size(j));
        std::vector<float> sum(n, 0.0f);
        for (std::size_t i = 0; i < n; ++i) {
            double s = 0;
            for (const auto& x : shares) s += chunk_value(x[b + i], chunk_scale(chunk_amax(&x[b], l.size(j)), f), f);
            sum[i] = static_cast<float>(s);
            if (!std::isnan(s)) {
                EXPECT_EQ(double(sum[i]), s) << "the test's premise: exact float32 sums";
            }
        }
        const double s2 = chunk_scale(chunk_amax(sum.data(), l.size(j)), f);
        for (std::size_t i = 0; i < n; ++i) out[b + i] = chunk_value(sum[i], s2, f);
    }
    return out;
}

// Every rank holds the oracle's values, bit for bit (NaN as NaN).
void expect_oracle(const Sums& got, const std::vector<double>& want) {
    for (std::size_t r = 0; r < got.ranks.size(); ++r) {
        ASSERT_EQ(got.ranks[r].size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            if (std::isnan(want[i])) {
                ASSERT_TRUE(std::isnan(got.ranks[r][i])) << "rank " << r << " element " << i;
            } else {
                ASSERT_EQ(got.ranks[r][i], float(want[i])) << "rank " << r << " element " << i;
                ASSERT_EQ(std::memcmp(&got.ranks[r][i], &got.ranks[0][i], sizeof(float)), 0)
                    << "rank " << r << " element " << i << " differs from rank 0's";
            }
        }
    }
}

TEST(DataParallelFp8Sum, KnownSharesSumToTheOracleOnEveryRank) {
    for (Format f : {Format::E4M3, Format::E5M2})
        for (int world : {2, 3})
            // Divisible by both rank counts, not divisible, fewer gradients than ranks.
            for (std::int64_t n : {std::int64_t(6000), std::int64_t(4099), std::int64_t(5), std::int64_t(1)}) {
                SCOPED_TRACE(std::string(name(f)) + ", " + std::to_string(world) + " ranks, " + std::to_string(n) +
                             " gradients");
                std::vector<std::vector<float>> shares;
                for (int r = 0; r < world; ++r) shares.push_back(share(n, unsigned(n * 10 + r)));
                const Sums got = fp8_sums(shares, f);
                expect_oracle(got, oracle(shares, f));
                EXPECT_EQ(got.bytes, (ChunkLayout{n, world}.bytes()));
            }
}

TEST(DataParallelFp8Sum, TheWireCarriesAQuarterOfFloat32sBytes) {
    // One byte per gradient, plus a 16-byte header and up to 15 bytes of padding per rank.
    const std::int64_t n = 1 << 20;
    for (int world : {2, 3, 8}) {
        const ChunkLayout l{n, world};
        EXPECT_GE(l.bytes(), n);
        EXPECT_LE(l.bytes(), n + 31 * world) << world;
    }
}

TEST(DataParallelFp8Sum, NanAndInfStayNonFiniteAndLeaveTheOtherGradientsAlone) {
    for (Format f : {Format::E4M3, Format::E5M2})
        for (int world : {2, 3}) {
            SCOPED_TRACE(std::string(name(f)) + ", " + std::to_string(world) + " ranks");
            const std::int64_t n = 1000;
            std::vector<std::vector<float>> shares;
            for (int r = 0; r < world; ++r) shares.push_back(share(n, unsigned(77 + r)));
            shares[0][3] = kNaN;
            shares[1][500] = kInf;  // in another rank's chunk than the NaN
            shares[world - 1][999] = -kInf;
            const Sums got = fp8_sums(shares, f);
            expect_oracle(got, oracle(shares, f));  // its scale for a chunk with Inf is 1
            for (const auto& g : got.ranks)
                for (std::size_t i = 0; i < g.size(); ++i)
                    EXPECT_EQ(std::isfinite(g[i]), i != 3 && i != 500 && i != 999) << "element " << i;
        }
}

TEST(DataParallelFp8Sum, ZeroBucketsSumToZero) {
    for (int world : {2, 3}) {
        const std::vector<std::vector<float>> zeros(static_cast<std::size_t>(world), std::vector<float>(777, 0.0f));
        const Sums got = fp8_sums(zeros, Format::E4M3);
        for (const auto& g : got.ranks)
            for (float v : g) ASSERT_EQ(v, 0.0f);
        // ... and an empty bucket is no traffic.
        const Sums none = fp8_sums(std::vector<std::vector<float>>(std::size_t(world)), Format::E4M3);
        EXPECT_EQ(none.bytes, 0);
    }
}

TEST(DataParallelFp8Sum, AChunkOfSmallGradientsKeepsItsOwnScale) {
    // Chunk 1 of both shares is 2^-30 of chunk 0: a scale of its own keeps its gradients
    // (one scale for the bucket would flush them to zero in E4M3, 2^-17.8 of the amax).
    const std::int64_t n = 64;
    std::vector<std::vector<float>> shares{share(n, 1), share(n, 2)};
    for (std::int64_t i = n / 2; i < n; ++i)
        for (auto& s : shares) s[std::size_t(i)] = std::ldexp(s[std::size_t(i)], -30);
    const Sums got = fp8_sums(shares, Format::E4M3);
    expect_oracle(got, oracle(shares, Format::E4M3));
    for (std::int64_t i = n / 2; i < n; ++i) {
        const double exact = double(shares[0][std::size_t(i)]) + shares[1][std::size_t(i)];
        EXPECT_NEAR(got.ranks[0][std::size_t(i)], exact, std::fabs(exact) / 8 + 1e-12) << i;
    }
}

TEST(DataParallelFp8Sum, TheErrorAgainstABf16ShadowSumMatchesAFloat64Reference) {
    // A hand-made bucket of 3 x 64 gradients on 3 ranks, one chunk per rank:
    // - chunks 0 and 1: multiples of 1/16 in [1/16, 17/16] on every rank (E4M3 scale 256),
    //   but every 8th gradient is 1e-12 on every rank: 2.6e-10 after scaling, far below
    //   E4M3's smallest code, so those 16 sums underflow to 0;
    // - chunk 2: zeros, but gradient 130 is 1.99 * 2^127 on rank 0: its scale is 2^-120,
    //   254.7 rounds to the code 256, and 256 * 2^120 = 2^128 overflows float32 (the sum
    //   then NaN), where the BF16 sum is finite.
    const int world = 3;
    const std::int64_t n = 192;
    std::vector<std::vector<float>> shares(world, std::vector<float>(std::size_t(n), 0.0f));
    for (int r = 0; r < world; ++r)
        for (std::size_t i = 0; i < 128; ++i)
            shares[std::size_t(r)][i] = i % 8 == 3 ? 1e-12f : float(1 + (i * 7 + std::size_t(r) * 13) % 17) / 16;
    shares[0][130] = std::ldexp(1.99f, 127);

    std::vector<std::vector<float>> got(world);
    std::vector<std::vector<std::uint16_t>> shadow(world);
    std::vector<GradSumError> error(world);
    testing::run_ranks(world, "cpu", 1, [&](Rank& r) {
        const std::size_t k = std::size_t(r.env.rank);
        Fp8GradSum sum(*r.backend, *r.comm, Format::E4M3, std::size_t(n));
        DeviceBuffer<float> grads(*r.backend, std::size_t(n)), mine(*r.backend, std::size_t(n));
        DeviceBuffer<std::uint16_t> low(*r.backend, std::size_t(n));
        r.backend->copy_from_host(grads.data(), shares[k].data(), std::size_t(n) * sizeof(float));
        r.backend->copy_from_host(mine.data(), shares[k].data(), std::size_t(n) * sizeof(float));
        sum.sum(grads.data(), n);
        bf16_shadow_sum(*r.backend, *r.comm, mine.data(), low.data(), n);
        r.comm->synchronize();
        got[k].resize(std::size_t(n));
        shadow[k].resize(std::size_t(n));
        r.backend->copy_to_host(got[k].data(), grads.data(), std::size_t(n) * sizeof(float));
        r.backend->copy_to_host(shadow[k].data(), low.data(), std::size_t(n) * sizeof(std::uint16_t));
        error[k] = grad_sum_error(got[k], shadow[k]);
    });

    // The float64 reference: the sums of the shares, and the figures of the FP8 sums
    // against it.
    double signal = 0, noise = 0;
    int nonzero = 0, underflow = 0, overflow = 0;
    for (std::size_t i = 0; i < std::size_t(n); ++i) {
        double ref = 0;
        for (const auto& x : shares) ref += x[i];
        const double g = got[0][i];
        if (ref != 0) ++nonzero, underflow += g == 0;
        if (!std::isfinite(g)) {
            ++overflow;
            continue;
        }
        signal += ref * ref;
        noise += (g - ref) * (g - ref);
        if (i < 128 && i % 8 != 3) {  // the BF16 shadow holds these sums exactly (<= 51/16)
            EXPECT_EQ(double(bf16_to_float(shadow[0][i])), ref) << i;
        }
    }
    EXPECT_EQ(underflow, 16);
    EXPECT_EQ(nonzero, 129);
    EXPECT_EQ(overflow, 1);
    const double snr = 10 * std::log10(signal / noise);
    for (int r = 0; r < world; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        EXPECT_EQ(std::memcmp(got[std::size_t(r)].data(), got[0].data(), std::size_t(n) * 4), 0);
        EXPECT_DOUBLE_EQ(error[std::size_t(r)].underflow_pct, 100.0 * underflow / nonzero);
        EXPECT_DOUBLE_EQ(error[std::size_t(r)].overflow_pct, 100.0 * overflow / double(n));
        // The shadow differs from the reference only in the 1e-12 sums (and the huge one,
        // left out): the SNRs agree to far better than 0.01 dB.
        EXPECT_NEAR(error[std::size_t(r)].snr_db, snr, 0.01);
    }
    EXPECT_GT(snr, 20.0);  // E4M3 codes of these magnitudes: a few percent of error
    EXPECT_LT(snr, 50.0);
    EXPECT_TRUE(std::isnan(got[0][130]));
}

TEST(DataParallelFp8Sum, TheErrorFiguresOfEqualSumsAndOfNoSignal) {
    const std::vector<float> got{1.0f, -2.0f, 0.0f};
    const std::vector<std::uint16_t> same{float_to_bf16(1.0f), float_to_bf16(-2.0f), float_to_bf16(0.0f)};
    const GradSumError e = grad_sum_error(got, same);
    EXPECT_EQ(e.snr_db, INFINITY);
    EXPECT_EQ(e.underflow_pct, 0.0);
    EXPECT_EQ(e.overflow_pct, 0.0);
    const std::vector<float> zeros(3, 0.0f);
    const std::vector<std::uint16_t> zero_shadow(3, 0);
    const GradSumError z = grad_sum_error(zeros, zero_shadow);
    EXPECT_TRUE(std::isnan(z.snr_db));
    EXPECT_TRUE(std::isnan(z.underflow_pct));
    EXPECT_EQ(z.overflow_pct, 0.0);
    EXPECT_THROW(grad_sum_error(got, std::span<const std::uint16_t>(zero_shadow).subspan(0, 2)), std::invalid_argument);
}

}  // namespace
}  // namespace fp8scope
