#include <gtest/gtest.h>

#include "tensor.h"

using fp8scope::Tensor;

TEST(Tensor, FlattensLeadingDimensionsOverTheLast) {
    Tensor t{"x", {2, 3, 5}, std::vector<float>(30)};
    auto m = t.matrix();
    EXPECT_EQ(m.rows, 6);
    EXPECT_EQ(m.cols, 5);
    EXPECT_EQ(t.shape_string(), "2x3x5");
}

TEST(Tensor, OneDimensionalIsOneRow) {
    Tensor t{"v", {7}, std::vector<float>(7)};
    EXPECT_EQ(t.matrix().rows, 1);
    EXPECT_EQ(t.matrix().cols, 7);
}

TEST(Tensor, ZeroDimensionalHasNoMatrix) {
    Tensor t{"s", {}, {1.0f}};
    EXPECT_THROW(t.matrix(), std::invalid_argument);
}
