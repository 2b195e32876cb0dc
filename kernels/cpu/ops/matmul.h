// Float32 matrix products of the model, on OpenBLAS sgemm: the unquantized linear layer
// (used by the output head and by the baseline recipe) and the small pieces the FP8 path
// shares with it (bias, transpose, a row-major sgemm wrapper).
// Shapes: N rows (B*T), K input features (contraction of fprop), M output features.
#pragma once

#include <cstdint>

namespace fp8scope::ops {

// Threads OpenBLAS may use for one GEMM (<= 0: its default, all cores).
void set_blas_threads(int threads);

// c (m,n) = alpha * op(a) op(b) + beta * c, row-major; op = transpose when the flag is set.
// a is (m,k) or, transposed, (k,m); b is (k,n) or, transposed, (n,k).
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
           const float* b, float* c, float beta = 0.0f);

// out (N,M) = inp (N,K) weight^T (M,K) + bias (M); bias may be null
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t K, std::int64_t M);
// dinp (N,K) = dout weight; dweight (M,K) = dout^T inp; dbias (M) = column sums of dout.
// All three are overwritten; any of them may be null.
void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t N, std::int64_t K, std::int64_t M);

// out (N,M) += bias (M)
void add_bias(float* out, const float* bias, std::int64_t N, std::int64_t M);
// dbias (M) = sum over rows of dout (N,M), rows in order
void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t M);
// dst (cols,rows) = src (rows,cols)^T
void transpose(float* dst, const float* src, std::int64_t rows, std::int64_t cols);

}  // namespace fp8scope::ops
