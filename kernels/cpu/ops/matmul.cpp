// Float32 GEMMs through cblas_sgemm, on the OpenBLAS kernel blas::init() chose. OpenBLAS
// splits a GEMM over threads by output tiles, never along k, so a product is bitwise
// reproducible for a fixed kernel and thread count (another kernel blocks k differently,
// so its sums differ in the last bits). The bias gradient is split by column ranges for
// the same reason.
#include "cpu/ops/matmul.h"

#include <cblas.h>

#include <algorithm>

#include "cpu/blas.h"
#include "util/parallel.h"

namespace fp8scope::ops {

void set_blas_threads(int threads) {
    blas::init();
    openblas_set_num_threads(threads > 0 ? threads : openblas_get_num_procs());
}

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, const float* a,
           const float* b, float* c, float beta) {
    static const bool chosen = (blas::init(), true);  // before the first GEMM
    (void)chosen;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                blasint(m), blasint(n), blasint(k), 1.0f, a, blasint(trans_a ? m : k), b,
                blasint(trans_b ? k : n), beta, c, blasint(n));
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    std::int64_t N, std::int64_t K, std::int64_t M) {
    sgemm(false, true, N, M, K, inp, weight, out);
    if (bias) add_bias(out, bias, N, M);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::int64_t N, std::int64_t K, std::int64_t M) {
    if (dinp) sgemm(false, false, N, K, M, dout, weight, dinp);
    if (dweight) sgemm(true, false, M, K, N, dout, inp, dweight);
    if (dbias) bias_backward(dbias, dout, N, M);
}

void add_bias(float* out, const float* bias, std::int64_t N, std::int64_t M) {
    parallel_for(N, 16, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n)
            for (std::int64_t j = 0; j < M; ++j) out[n * M + j] += bias[j];
    });
}

void bias_backward(float* dbias, const float* dout, std::int64_t N, std::int64_t M) {
    parallel_for(M, 256, 0, [&](std::int64_t j0, std::int64_t j1) {
        for (std::int64_t j = j0; j < j1; ++j) dbias[j] = 0.0f;
        for (std::int64_t n = 0; n < N; ++n)
            for (std::int64_t j = j0; j < j1; ++j) dbias[j] += dout[n * M + j];
    });
}

}  // namespace fp8scope::ops

