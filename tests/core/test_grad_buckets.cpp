// Gradient buckets on hand-computed layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/grad_buckets.h"

namespace fp8scope {
namespace {

std::vector<ParamTensor> layout(const std::vector<std::int64_t>& sizes) {
    std::vector<ParamTensor> t;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        std::string name = "t";
        name += std::to_string(i);
        t.push_back({name, offset, {sizes[i]}, true});
        offset += std::size_t(sizes[i]);
    }
    return t;
}

TEST(GradBuckets, CutsInBackwardOrderAtTheLimit) {
    // 50-element buckets (200 bytes of float32) over tensors of 10, 20, 30, 40, 100:
    // backward ends t4 first (alone, larger than a bucket), then t3, then t2 + t1 (50),
    // then t0.
    const auto b = plan_grad_buckets(layout({10, 20, 30, 40, 100}), 4, 200);
    ASSERT_EQ(b.size(), 4u);
    EXPECT_EQ(b[0].offset, 100u);
    EXPECT_EQ(b[0].count, 100u);
    EXPECT_EQ(b[0].tensors, std::vector<std::size_t>{4});
    EXPECT_EQ(b[1].offset, 60u);
    EXPECT_EQ(b[1].count, 40u);
    EXPECT_EQ(b[2].offset, 10u);
    EXPECT_EQ(b[2].count, 50u);
    EXPECT_EQ(b[2].tensors, (std::vector<std::size_t>{2, 1}));
    EXPECT_EQ(b[3].offset, 0u);
    EXPECT_EQ(b[3].count, 10u);
    // One bucket holds everything when the limit allows.
    const auto one = plan_grad_buckets(layout({10, 20, 30}), 4, 1 << 20);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(one[0].count, 60u);
}

TEST(GradBuckets, TheBucketsTileTheFlatArray) {
    const auto t = layout({7, 1, 300, 64, 64, 5, 1000, 3});
    const auto b = plan_grad_buckets(t, 2, 256);
    std::size_t end = 1444;  // the array's size: buckets come back to front
    for (const GradBucket& x : b) {
        EXPECT_EQ(x.offset + x.count, end);
        EXPECT_TRUE(x.count <= 128 || x.tensors.size() == 1) << "only a lone tensor exceeds the limit";
        end = x.offset;
    }
    EXPECT_EQ(end, 0u);
}

TEST(GradBuckets, ATensorOutOfPlaceIsNamed) {
    auto t = layout({10, 20});
    t[1].offset = 12;
    try {
        plan_grad_buckets(t, 4, 100);
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("t1 starts at element 12, expected 10"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace fp8scope
