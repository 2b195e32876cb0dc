// Out-of-place transpose. Rows of a few KiB apart alias in L1 (4 KiB strides), so an
// element-wise tiled loop runs at a fraction of memory speed; 8x8 blocks go through
// registers instead (AVX), and threads take bands of rows.
#include <algorithm>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "cpu/ops/matmul.h"
#include "util/parallel.h"

namespace fp8scope::ops {
namespace {

constexpr std::int64_t kTile = 64;  // a tile of each side stays in L1

#if defined(__AVX__)
// d (8 x 8, row stride ld) = transpose of s (8 x 8, row stride ls).
inline void transpose8(const float* s, std::int64_t ls, float* d, std::int64_t ld) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ls);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(d + i * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(d + (i + 4) * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}
#endif

void transpose_tile(float* dst, const float* src, std::int64_t rows, std::int64_t cols, std::int64_t r0,
                    std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    std::int64_t r = r0;
#if defined(__AVX__)
    for (; r + 8 <= r1; r += 8) {
        std::int64_t c = c0;
        for (; c + 8 <= c1; c += 8) transpose8(src + r * cols + c, cols, dst + c * rows + r, rows);
        for (; c < c1; ++c)
            for (std::int64_t i = r; i < r + 8; ++i) dst[c * rows + i] = src[i * cols + c];
    }
#endif
    for (; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) dst[c * rows + r] = src[r * cols + c];
}

}  // namespace

void transpose(float* dst, const float* src, std::int64_t rows, std::int64_t cols) {
    const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
    parallel_for(row_tiles, 1, 0, [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t r0 = t0 * kTile; r0 < std::min(rows, t1 * kTile); r0 += kTile)
            for (std::int64_t c0 = 0; c0 < cols; c0 += kTile)
                transpose_tile(dst, src, rows, cols, r0, std::min(rows, r0 + kTile), c0, std::min(cols, c0 + kTile));
    });
}

}  // namespace fp8scope::ops
