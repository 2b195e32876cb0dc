// Out-of-place transpose. Rows of a few KiB apart alias in L1 (4 KiB strides), so an
// element-wise tiled loop runs at a fraction of memory speed; 8x8 blocks go through
// registers instead (simd.h's transpose_block, AVX where the CPU has it), and threads
// take bands of rows.
#include <algorithm>

#include "cpu/ops/matmul.h"
#include "cpu/simd.h"
#include "util/parallel.h"

namespace fp8scope::ops {
namespace {

constexpr std::int64_t kTile = 64;  // a tile of each side stays in L1

}  // namespace

void transpose(float* dst, const float* src, std::int64_t rows, std::int64_t cols) {
    const std::int64_t row_tiles = (rows + kTile - 1) / kTile;
    const simd::Kernels& k = simd::kernels();
    parallel_for(row_tiles, 1, 0, [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t r0 = t0 * kTile; r0 < std::min(rows, t1 * kTile); r0 += kTile)
            for (std::int64_t c0 = 0; c0 < cols; c0 += kTile)
                k.transpose_block(dst, rows, src, cols, r0, std::min(rows, r0 + kTile), c0, std::min(cols, c0 + kTile));
    });
}

}  // namespace fp8scope::ops
