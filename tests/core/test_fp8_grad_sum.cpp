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

}  // namespace
}  // namespace fp8scope
