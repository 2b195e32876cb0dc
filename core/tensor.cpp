#include "tensor.h"

#include <stdexcept>

namespace fp8scope {

std::int64_t Tensor::numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
}

MatrixView Tensor::matrix() const {
    if (shape.empty()) throw std::invalid_argument("tensor '" + name + "' is 0-d; a matrix needs rank >= 1");
    std::int64_t cols = shape.back();
    std::int64_t rows = cols == 0 ? 0 : numel() / cols;
    return MatrixView{data.data(), rows, cols};
}

std::string Tensor::shape_string() const {
    std::string s;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += 'x';
        s += std::to_string(shape[i]);
    }
    return s.empty() ? "scalar" : s;
}

}  // namespace fp8scope
