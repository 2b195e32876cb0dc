// GELU and SwiGLU, elementwise over rows, with the vectorizable exp of vec_math.h
// (libm's tanhf/expf are scalar calls and made GELU cost as much as a GEMM). The Smooth-SwiGLU absmax is a max, which does
// not depend on the order of evaluation, so channel ranges run in parallel freely.
#include "cpu/ops/activation.h"

#include <algorithm>
#include <cmath>

#include "cpu/ops/vec_math.h"
#include "util/parallel.h"

namespace fp8scope::ops {
namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
}

void gelu_forward(float* out, const float* inp, std::int64_t n) {
    parallel_for(n, 4096, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
            float x = inp[i];
            float u = kGeluC * (x + 0.044715f * x * x * x);
            out[i] = 0.5f * x * (1.0f + tanh_approx(u));
        }
    });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n) {
    parallel_for(n, 4096, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
            float x = inp[i];
            float u = kGeluC * (x + 0.044715f * x * x * x);
            float th = tanh_approx(u);
            float sech2 = 1.0f - th * th;
            float du = kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
            dinp[i] = (0.5f * (1.0f + th) + 0.5f * x * sech2 * du) * dout[i];
        }
    });
}

void swiglu_forward(float* out, const float* inp, std::int64_t N, int H) {
    parallel_for(N, 4, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* g = inp + n * 2 * H;
            const float* u = g + H;
            float* o = out + n * H;
            for (int j = 0; j < H; ++j) o[j] = g[j] * sigmoid_approx(g[j]) * u[j];
        }
    });
}

void swiglu_backward(float* dinp, const float* inp, const float* dout, std::int64_t N, int H) {
    parallel_for(N, 4, 0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t n = begin; n < end; ++n) {
            const float* g = inp + n * 2 * H;
            const float* u = g + H;
            const float* d = dout + n * H;
            float* dg = dinp + n * 2 * H;
            float* du = dg + H;
            for (int j = 0; j < H; ++j) {
                float sig = sigmoid_approx(g[j]);
                float silu = g[j] * sig;
                du[j] = d[j] * silu;
                dg[j] = d[j] * u[j] * sig * (1.0f + g[j] * (1.0f - sig));
            }
        }
    });
}

void smooth_swiglu_scales(float* scales, const float* h, std::int64_t N, int H) {
    parallel_for(H, 64, 0, [&](std::int64_t j0, std::int64_t j1) {
        for (std::int64_t j = j0; j < j1; ++j) scales[j] = 0.0f;
        for (std::int64_t n = 0; n < N; ++n) {
            const float* row = h + n * H;
            for (std::int64_t j = j0; j < j1; ++j) scales[j] = std::fmax(scales[j], std::fabs(row[j]));
        }
        for (std::int64_t j = j0; j < j1; ++j) {
            float a = scales[j];
            // clamped so the scale and its inverse stay normal float32 numbers
            scales[j] = (a > 0.0f && std::isfinite(a)) ? std::ldexp(1.0f, std::clamp(-std::ilogb(a), -126, 126)) : 1.0f;
        }
    });
}

void scale_columns(float* out, const float* in, const float* s, bool inverse, std::int64_t rows, std::int64_t cols) {
    parallel_for(rows, 16, 0, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = 0; c < cols; ++c)
                out[r * cols + c] = inverse ? in[r * cols + c] / s[c] : in[r * cols + c] * s[c];
    });
}

}  // namespace fp8scope::ops
