// LayerNorm and RMSNorm. Row statistics accumulate in double (C is small, accuracy is
// cheap here). Backward adds into dinp (the residual stream's gradient, which collects
// several contributions) and overwrites the parameter gradients; those are reductions
// over rows, split by channel ranges so every channel sums its rows in one fixed order
// whatever the thread count.
#include "cpu/ops/norm.h"

#include <cmath>

#include "util/parallel.h"

namespace fp8scope::ops {
namespace {

// dweight[c] = sum_n dout[n,c] * xhat[n,c]; dbias[c] = sum_n dout[n,c]. xhat is recomputed
// from the saved statistics (mean may be null for RMSNorm).
void norm_param_grads(float* dweight, float* dbias, const float* dout, const float* inp, const float* mean,
                      const float* rstd, std::int64_t N, int C) {
    parallel_for(C, 64, 0, [&](std::int64_t c0, std::int64_t c1) {
        for (std::int64_t c = c0; c < c1; ++c) {
            dweight[c] = 0.0f;
            if (dbias) dbias[c] = 0.0f;
        }
        for (std::int64_t n = 0; n < N; ++n) {
            const float* d = dout + n * C;
            const float* x = inp + n * C;
            float m = mean ? mean[n] : 0.0f, r = rstd[n];
            for (std::int64_t c = c0; c < c1; ++c) {
                dweight[c] += d[c] * ((x[c] - m) * r);
                if (dbias) dbias[c] += d[c];
            }
        }
    });
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::int64_t N, int C) {
    parallel_for(N, 8, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* x = inp + n * C;
            double s = 0, s2 = 0;
            for (int c = 0; c < C; ++c) s += x[c];
            double m = s / C;
            for (int c = 0; c < C; ++c) s2 += (x[c] - m) * (x[c] - m);
            float mf = float(m), r = float(1.0 / std::sqrt(s2 / C + kNormEps));
            float* o = out + n * C;
            for (int c = 0; c < C; ++c) o[c] = (x[c] - mf) * r * weight[c] + bias[c];
            mean[n] = mf;
            rstd[n] = r;
        }
    });
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N, int C) {
    parallel_for(N, 8, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* d = dout + n * C;
            const float* x = inp + n * C;
            float m = mean[n], r = rstd[n];
            // dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = w * dout
            double sd = 0, sdx = 0;
            for (int c = 0; c < C; ++c) {
                float dxhat = weight[c] * d[c];
                sd += dxhat;
                sdx += double(dxhat) * ((x[c] - m) * r);
            }
            float md = float(sd / C), mdx = float(sdx / C);
            float* dx = dinp + n * C;
            for (int c = 0; c < C; ++c) {
                float xhat = (x[c] - m) * r;
                dx[c] += (weight[c] * d[c] - md - xhat * mdx) * r;
            }
        }
    });
    norm_param_grads(dweight, dbias, dout, inp, mean, rstd, N, C);
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, std::int64_t N, int C) {
    parallel_for(N, 8, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* x = inp + n * C;
            double s2 = 0;
            for (int c = 0; c < C; ++c) s2 += double(x[c]) * x[c];
            float r = float(1.0 / std::sqrt(s2 / C + kNormEps));
            float* o = out + n * C;
            for (int c = 0; c < C; ++c) o[c] = x[c] * r * weight[c];
            rstd[n] = r;
        }
    });
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, std::int64_t N, int C) {
    parallel_for(N, 8, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* d = dout + n * C;
            const float* x = inp + n * C;
            float r = rstd[n];
            // dx = r * (dxhat - xhat * mean(dxhat * xhat)), xhat = x * r
            double sdx = 0;
            for (int c = 0; c < C; ++c) sdx += double(weight[c] * d[c]) * (x[c] * r);
            float mdx = float(sdx / C);
            float* dx = dinp + n * C;
            for (int c = 0; c < C; ++c) dx[c] += (weight[c] * d[c] - x[c] * r * mdx) * r;
        }
    });
    norm_param_grads(dweight, nullptr, dout, inp, nullptr, rstd, N, C);
}

}  // namespace fp8scope::ops
