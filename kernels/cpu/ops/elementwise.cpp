// Every element on its own, so the parallel loops cannot change results.
#include "cpu/ops/elementwise.h"

#include "util/parallel.h"

namespace fp8scope::ops {

void add(float* out, const float* a, const float* b, std::int64_t n) {
    parallel_for(n, 4096, 0, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
    });
}

void scale(float* x, float factor, std::int64_t n) {
    parallel_for(n, 1 << 14, 0, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) x[i] *= factor;
    });
}

void scale_channels(float* t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, int count, bool by_row,
                    float factor) {
    for (int k = 0; k < count; ++k) {
        const std::int64_t i = index[k];
        if (by_row)
            for (std::int64_t c = 0; c < cols; ++c) t[i * cols + c] *= factor;
        else
            for (std::int64_t r = 0; r < rows; ++r) t[r * cols + i] *= factor;
    }
}

}  // namespace fp8scope::ops
