// The byte collectives of the CPU ranks' communicator (TCP through the rendezvous), on 2
// and 3 ranks as threads: an all-to-all hands part j of every rank's array to rank j, an
// all-gather every rank's array to every rank, in place too.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

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

}  // namespace
}  // namespace fp8scope
