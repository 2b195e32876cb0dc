// Float32 tensors as the numerics core sees them. Every analysis works on a 2-D
// row-major view whose last dimension is the contraction dimension; higher ranks are
// flattened over their leading dimensions, a 1-D tensor is one row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8scope {

struct MatrixView {
    const float* data = nullptr;
    std::int64_t rows = 0;
    std::int64_t cols = 0;  // contraction dimension

    std::int64_t size() const { return rows * cols; }
    const float* row(std::int64_t r) const { return data + r * cols; }
};

struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> data;  // row-major (C order), converted to float32 on load

    std::int64_t numel() const;
    // Rows = product of all but the last dimension. Requires rank >= 1.
    MatrixView matrix() const;
    std::string shape_string() const;  // "217x256"
};

}  // namespace fp8scope
