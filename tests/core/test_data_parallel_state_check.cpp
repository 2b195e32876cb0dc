// The cross-rank check of delayed scaling's state (engine/data_parallel_state_check.h):
// FNV-1a against its published test vectors, which tensors and ranks a set of digests
// names (the most common digest is the reference, a tie goes to the lowest rank's), and
// that a tensor is reported once when it starts to differ.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "engine/data_parallel_state_check.h"

namespace fp8scope {
namespace {

TEST(ScalingStateCheck, Fnv1aMatchesItsTestVectors) {
    EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ull);
    EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
    EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ull);
    // Chained: the hash of "foo" continued with "bar" is the hash of "foobar".
    EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), 0x85944171f73967e8ull);
}

std::vector<ScalingDigest> named(const std::vector<std::uint64_t>& d) {
    std::vector<ScalingDigest> out;
    for (std::size_t i = 0; i < d.size(); ++i) out.push_back({"t" + std::to_string(i), d[i]});
    return out;
}

TEST(ScalingStateCheck, TheMostCommonDigestIsTheReferenceAndTheOthersAreNamed) {
    // 4 ranks, 3 tensors: t0 agrees; t1 differs on rank 2 alone; t2 is split 2 against 2
    // (ranks 0 and 3 against 1 and 2: the group of rank 0 is the reference).
    const std::vector<std::vector<std::uint64_t>> all{{1, 5, 7}, {1, 5, 8}, {1, 6, 8}, {1, 5, 7}};
    const std::vector<ScalingMismatch> m = find_mismatches(all, named(all[0]));
    ASSERT_EQ(m.size(), 2u);
    EXPECT_EQ(m[0].tensor, "t1");
    EXPECT_EQ(m[0].ranks, (std::vector<int>{2}));
    EXPECT_EQ(m[0].agreeing, (std::vector<int>{0, 1, 3}));
    EXPECT_EQ(m[1].tensor, "t2");
    EXPECT_EQ(m[1].ranks, (std::vector<int>{1, 2}));
    EXPECT_EQ(m[1].agreeing, (std::vector<int>{0, 3}));
    // Every rank agreeing: nothing; a rank that holds fewer tensors differs past its list.
    EXPECT_TRUE(find_mismatches({{1, 2}, {1, 2}}, named({1, 2})).empty());
    const std::vector<ScalingMismatch> short_list = find_mismatches({{1, 2}, {1}, {1, 2}}, named({1, 2}));
    ASSERT_EQ(short_list.size(), 1u);
    EXPECT_EQ(short_list[0].tensor, "t1");
    EXPECT_EQ(short_list[0].ranks, (std::vector<int>{1}));
}

TEST(ScalingStateCheck, ATensorIsReportedWhenItStartsToDifferNotEveryStep) {
    ScalingStateCheck check;
    const ScalingMismatch t1{"blocks.0.mlp.fc2 dy", {1}, {0, 2}};
    const std::vector<std::string> first = check.report({t1});
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0],
              "delayed scaling state of blocks.0.mlp.fc2 dy differs on rank(s) 1 from rank(s) 0, 2 (amax history or "
              "scale not bitwise equal)");
    EXPECT_TRUE(check.report({t1}).empty());  // still differs: said already
    EXPECT_TRUE(check.report({}).empty());    // the ranks agree again
    EXPECT_EQ(check.report({t1}).size(), 1u);  // and differ anew: said again
    // Past kMaxReported new tensors in one step, one line counts the rest.
    std::vector<ScalingMismatch> many;
    for (int i = 0; i < 11; ++i) many.push_back({"t" + std::to_string(i), {1}, {0}});
    const std::vector<std::string> lines = ScalingStateCheck().report(many);
    ASSERT_EQ(lines.size(), ScalingStateCheck::kMaxReported + 1);
    EXPECT_EQ(lines.back(), "delayed scaling state of 3 more tensor(s) differs across ranks");
}

}  // namespace
}  // namespace fp8scope
