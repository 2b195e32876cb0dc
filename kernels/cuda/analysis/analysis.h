// The analysis of one tensor on the GPU (Backend::analyze, fp8/analysis.h): statistics,
// every recipe's error figures, the log2 histogram, per-channel absmax, the top values
// and the per-tile maps, computed where the tensor lives; only the figures cross to the
// host. Plain C++ so the backend includes it without nvcc.
//
// Passes (all on one stream, one host wait at the end):
//   1. moments: flat over the stored data (the layout does not matter): sums, amax,
//      NaN/Inf and zero counts, the least |x| and the log2 histogram, per block of
//      threads; the last block to finish combines them in a fixed order and derives the
//      mean, the outlier threshold and the per-tensor scales.
//   2. tiles: one thread block per 128 x 128 tile of the view: central moments, the count
//      beyond the threshold, channel absmax, then for every recipe its block amaxes and
//      scales and the error sums (the tile in shared memory, a transposed view transposed
//      while it is loaded; without recipes it stays in registers). The per-tile sums are
//      the tile maps; a second kernel adds them in tile order, so the figures are the
//      same on every run.
//   3. top values: only tiles whose largest |x| reaches the k-th largest of pass 1's block
//      maxima can hold one; those tiles give their own top k, and one block merges them.
// Codes, counts, amaxes and scales equal the CPU's (the same rules, kernels/cuda/
// cast/rules.cuh); float64 sums differ from the CPU's by summation order, and error
// products are formed in float32 on values normalised by the tile's largest power of two
// (relative differences of about 1e-6).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend.h"
#include "fp8/analysis.h"

namespace fp8scope::cuda {

// A tensor as Backend::analyze sees it: (rows, cols) row-major, or with `transposed` the
// view of data stored as (cols, rows). F32 or BF16.
struct AnalysisInput {
    const void* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0, cols = 0;
    bool transposed = false;
};

// Whether the device analysis covers these recipes and options: per-tensor recipes,
// blocks of 2^i x {32, 64, 128} rows x columns (i <= 7), MX blocks of 32, 64 or 128, the
// FP4 quantizers (analysis/fp4.cuh),
// top_k <= 256, at most 2^33 elements. Otherwise the backend analyses on the host.
bool device_analysis_supports(const std::vector<Recipe>& recipes, const StatsOptions& opt, std::int64_t numel);

// Device and pinned host memory of the analysis, grown on demand and reused.
class Analyzer {
public:
    Analyzer();
    ~Analyzer();
    Analyzer(const Analyzer&) = delete;
    Analyzer& operator=(const Analyzer&) = delete;

    // The analysis of x on `stream`; waits for it. Requires device_analysis_supports().
    Analysis analyze(const AnalysisInput& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                     const AnalysisExtras& extras, cudaStream_t stream);

    struct Buffers;

private:
    std::unique_ptr<Buffers> buffers_;
};

}  // namespace fp8scope::cuda
