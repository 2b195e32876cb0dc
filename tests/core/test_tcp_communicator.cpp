// The collectives of the CPU ranks' communicator (TCP through the rendezvous), on 2 to 4
// ranks as threads: an all-to-all hands part j of every rank's array to rank j, an
// all-gather every rank's array to every rank, in place too; the max keeps a NaN or Inf
// of any one rank and every other bit (comm/max_order.h's keys).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "comm/max_order.h"
#include "io/half.h"
#include "support/data_parallel_job.h"

namespace fp8scope {
namespace {

using testing::Rank;
using testing::run_ranks;

// Byte i of part j of rank r's array: distinct across ranks, parts and positions.
std::uint8_t byte_of(int rank, int part, int i) { return std::uint8_t(rank * 97 + part * 31 + i * 7 + 1); }

TEST(TcpCommunicator, AllToAllHandsPartJOfEveryRankToRankJ) {
    for (int world : {2, 3}) {
        SCOPED_TRACE(std::to_string(world) + " ranks");
        const int bytes = 13;  // not a multiple of anything
        std::vector<std::vector<std::uint8_t>> got(static_cast<std::size_t>(world));
        run_ranks(world, "cpu", 1, [&](Rank& r) {
            const int me = r.env.rank;
            std::vector<std::uint8_t> send(static_cast<std::size_t>(world * bytes)), recv(send.size());
            for (int j = 0; j < world; ++j)
                for (int i = 0; i < bytes; ++i) send[std::size_t(j * bytes + i)] = byte_of(me, j, i);
            r.comm->all_to_all(send.data(), recv.data(), bytes);
            got[std::size_t(me)] = recv;
        });
        for (int me = 0; me < world; ++me)
            for (int from = 0; from < world; ++from)
                for (int i = 0; i < bytes; ++i)
                    ASSERT_EQ(got[std::size_t(me)][std::size_t(from * bytes + i)], byte_of(from, me, i))
                        << "rank " << me << " from rank " << from << " byte " << i;
    }
}

TEST(TcpCommunicator, AllGatherHandsEveryRanksPartToEveryRankInPlaceToo) {
    for (int world : {2, 3})
        for (bool in_place : {false, true}) {
            SCOPED_TRACE(std::to_string(world) + " ranks" + (in_place ? ", in place" : ""));
            const int bytes = 21;
            std::vector<std::vector<std::uint8_t>> got(static_cast<std::size_t>(world));
            run_ranks(world, "cpu", 1, [&](Rank& r) {
                const int me = r.env.rank;
                std::vector<std::uint8_t> mine(static_cast<std::size_t>(bytes));
                std::vector<std::uint8_t> all(static_cast<std::size_t>(world * bytes), 0);
                for (int i = 0; i < bytes; ++i) mine[std::size_t(i)] = byte_of(me, 0, i);
                std::uint8_t* send = mine.data();
                if (in_place) {
                    send = all.data() + me * bytes;
                    std::copy(mine.begin(), mine.end(), send);
                }
                r.comm->all_gather(send, all.data(), bytes);
                got[std::size_t(me)] = all;
            });
            for (int me = 0; me < world; ++me)
                for (int from = 0; from < world; ++from)
                    for (int i = 0; i < bytes; ++i)
                        ASSERT_EQ(got[std::size_t(me)][std::size_t(from * bytes + i)], byte_of(from, 0, i))
                            << "rank " << me << " from rank " << from << " byte " << i;
        }
}

TEST(TcpCommunicator, RanksThatDisagreeOnTheSizeFailNamingTheCollective) {
    EXPECT_THROW(
        {
            try {
                run_ranks(2, "cpu", 1, [&](Rank& r) {
                    std::vector<std::uint8_t> send(8), recv(16);
                    r.comm->all_gather(send.data(), recv.data(), r.env.rank == 0 ? 4 : 8);
                });
            } catch (const RendezvousError& e) {
                EXPECT_NE(std::string(e.what()).find("all_gather: rank "), std::string::npos) << e.what();
                throw;
            }
        },
        RendezvousError);
}

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }
constexpr std::uint32_t kQuietNaN = 0x7FC00000u;

// The oracle: any NaN gives the quiet NaN; else the largest value, +0 above -0.
float max_oracle(const std::vector<float>& v) {
    float m = v[0];
    for (float x : v) {
        if (std::isnan(x)) return from_bits(kQuietNaN);
        if (x > m || (x == m && std::signbit(m) && !std::signbit(x))) m = x;
    }
    return m;
}

TEST(MaxOrder, KeysOrderFloatsAsTheOracleAndMapBackToTheSameBits) {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> ascending{-inf,  -3.0e38f, -1.0f, from_bits(0x80800000u), from_bits(0x807FFFFFu),
                                       from_bits(0x80000001u), -0.0f, 0.0f, from_bits(0x00000001u),
                                       from_bits(0x007FFFFFu), from_bits(0x00800000u), 1.0f, 3.0e38f, inf,
                                       std::numeric_limits<float>::quiet_NaN()};
    for (std::size_t i = 0; i + 1 < ascending.size(); ++i)
        EXPECT_LT(max_key(ascending[i]), max_key(ascending[i + 1])) << i;
    // Every NaN (either sign, quiet or signalling, any payload) is the one quiet NaN.
    for (std::uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u})
        EXPECT_EQ(bits(from_max_key(max_key(from_bits(nan)))), kQuietNaN) << std::hex << nan;
    // Every other float comes back with its own bits (every 251st pattern, all exponents).
    for (std::uint64_t u = 0; u <= 0xFFFFFFFFu; u += 251) {
        const float f = from_bits(std::uint32_t(u));
        if (std::isnan(f)) continue;
        ASSERT_EQ(bits(from_max_key(max_key(f))), std::uint32_t(u)) << std::hex << u;
    }
}

// Rank r's values in a max over 4 ranks: column c of `table` row r.
std::vector<std::vector<float>> max_over_ranks(const std::vector<std::vector<float>>& table, DType dtype) {
    const int world = int(table.size());
    std::vector<std::vector<float>> got(table.size());
    run_ranks(world, "cpu", 1, [&](Rank& r) {
        std::vector<float> v = table[std::size_t(r.env.rank)];
        if (dtype == DType::F32) {
            r.comm->all_reduce(v.data(), std::int64_t(v.size()), ReduceOp::Max);
        } else {
            std::vector<std::uint16_t> low(v.size());
            for (std::size_t i = 0; i < v.size(); ++i) low[i] = float_to_bf16(v[i]);
            r.comm->all_reduce(low.data(), DType::BF16, std::int64_t(v.size()), ReduceOp::Max);
            for (std::size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_float(low[i]);
        }
        got[std::size_t(r.env.rank)] = v;
    });
    return got;
}

TEST(TcpCommunicator, AMaxKeepsANaNOrInfOfOneRankOnEveryRankAndEveryOtherBit) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float tiny = from_bits(0x00000001u), denorm = from_bits(0x00400000u);  // 2^-149, 2^-127
    // Columns: NaN on rank 2 of 4 (and -NaN, a NaN with a payload), Inf, -Inf below
    // finite values, signed zeros, denormals, ordinary amaxes.
    const std::vector<std::vector<float>> table{
        {1.0f, 1.0f, 1.0f, 5.0f, -1.0f, -0.0f, -0.0f, 0.0f, 0.0f, tiny, 0.0f, 2.5f},
        {2.0f, 2.0f, 2.0f, 6.0f, -2.0f, -0.0f, 0.0f, -0.0f, tiny, denorm, -0.0f, 7.0f},
        {nan, -nan, from_bits(0x7F800123u), inf, -inf, -0.0f, -0.0f, -0.0f, 0.0f, tiny, denorm, 3.0f},
        {3.0f, 3.0f, 3.0f, 7.0f, -3.0f, -0.0f, -0.0f, -0.0f, 0.0f, 0.0f, tiny, 1.0f},
    };
    const std::vector<std::vector<float>> got = max_over_ranks(table, DType::F32);
    for (std::size_t c = 0; c < table[0].size(); ++c) {
        std::vector<float> column;
        for (const auto& row : table) column.push_back(row[c]);
        const float want = max_oracle(column);
        for (std::size_t r = 0; r < got.size(); ++r)
            EXPECT_EQ(bits(got[r][c]), bits(want)) << "column " << c << " on rank " << r;
    }
    EXPECT_EQ(bits(got[1][0]), kQuietNaN);
    EXPECT_EQ(got[3][3], inf);
    EXPECT_EQ(bits(got[0][5]), bits(-0.0f));  // -0 everywhere stays -0
    EXPECT_EQ(bits(got[0][6]), bits(0.0f));
    EXPECT_EQ(bits(got[0][9]), bits(denorm));  // no denormal flushed
}

TEST(TcpCommunicator, ABf16MaxKeepsANaNOfOneRankLikewise) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::vector<std::vector<float>> table{{1.0f, 1.0f, -0.0f}, {2.0f, 2.0f, -0.0f}, {nan, inf, -0.0f}};
    const std::vector<std::vector<float>> got = max_over_ranks(table, DType::BF16);
    for (const auto& row : got) {
        EXPECT_TRUE(std::isnan(row[0]));
        EXPECT_EQ(row[1], inf);
        EXPECT_EQ(bits(row[2]), bits(-0.0f));
    }
}

}  // namespace
}  // namespace fp8scope
