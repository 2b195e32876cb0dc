// An elastic job's change of world at the level of its data-parallel step: four ranks in
// one process (threads), one of which leaves; the others agree on the new world, the latest
// snapshot they all hold (not the latest any holds), the latest step any was in, and then
// average over the new world, each rank's value weighted by its rows of the batch.
#include <gtest/gtest.h>

#include <array>
#include <mutex>

#include "support/data_parallel_job.h"

namespace fp8scope {
namespace {

TEST(ElasticWorld, SurvivorsAgreeOnTheCommonSnapshotAndAverageByRows) {
    // Rank 1 took the snapshot of step 12 that the others did not reach; rank 3 was one step
    // further on.
    const std::array<std::vector<std::int64_t>, 4> snapshots = {
        std::vector<std::int64_t>{4, 8}, {8, 12}, {4, 8}, {4, 8}};
    const std::array<std::int64_t, 4> in_flight = {13, 13, 13, 14};
    std::mutex mu;
    std::vector<WorldChange> changes;
    std::vector<double> means;
    TrainConfig config;
    testing::run_ranks(4, "cpu", 1, [&](testing::Rank& rank) {
        const int r = rank.env.rank;
        rank.dp = std::make_unique<DataParallel>(*rank.rendezvous, *rank.comm, "cpu");
        rank.step = std::make_unique<DataParallelStep>(*rank.dp, config.recipe_book());
        if (r == 2) {
            rank.rendezvous.reset();  // leaves: its connection closes
            return;
        }
        rank.rendezvous->set_elastic(true);
        std::unique_ptr<Communicator> next;
        rank.step->set_elastic({{}, [&]() -> Communicator& {
                                    next = make_communicator(*rank.backend, *rank.rendezvous);
                                    return *next;
                                }});
        rank.step->set_batch_rows(8);
        WorldChange change;
        try {
            rank.step->mean({1.0});
            ADD_FAILURE() << "rank " << r << ": the exchange went on without rank 2";
            return;
        } catch (const std::exception& fault) {
            change = rank.step->change_world(fault, in_flight[std::size_t(r)], snapshots[std::size_t(r)]);
        }
        // 8 rows over 3 ranks: 2, 3, 3; each rank's value its new rank.
        const double mean = rank.step->mean({double(rank.step->rank())})[0];
        std::lock_guard lock(mu);
        changes.push_back(change);
        means.push_back(mean);
        rank.comm = std::move(next);
    });
    ASSERT_EQ(changes.size(), 3u);
    for (const WorldChange& c : changes) {
        EXPECT_EQ(c.lost, std::vector<int>{2});
        EXPECT_EQ(c.old_world, 4);
        EXPECT_EQ(c.new_world, 3);
        EXPECT_EQ(c.restore_step, 8);
        EXPECT_EQ(c.failed_step, 14);
    }
    for (double m : means) EXPECT_EQ(m, (0.0 * 2 + 1.0 * 3 + 2.0 * 3) / 8);
}

}  // namespace
}  // namespace fp8scope
