// BF16 copies of float32 parameters for the GEMMs that read weights in BF16 (the baseline
// recipe's linears, the output head). Converting a weight before each use moves 6 bytes
// an element (read 4, write 2); AdamW, which reads and writes the weight anyway, can
// write the copy for 2. So the backend converts on demand and counts what was asked for
// between two updates; an update of a parameter range writes its copy when at least a
// third of the range was asked for (the copy then pays for itself), and the next reads
// take it from there. Every other write into the range (copies from the host or within
// the device, zero fills, new allocations over old ones) makes the copy stale.
// Lanes share the mirror (each run's parameters are ranges of their own): its book is locked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cuda/cuda_backend.h"

namespace fp8scope::cuda {

class WeightMirror {
public:
    explicit WeightMirror(CudaBackend& backend) : backend_(&backend) {}

    // The current BF16 copy of w[0, n), or null (the caller converts); counts the ask.
    const std::uint16_t* find(const float* w, std::int64_t n);
    // An AdamW update of params[0, n) is about to be queued: where it writes the range's
    // copy (valid once the update has run, in stream order), or null for no copy.
    std::uint16_t* for_update(const float* params, std::int64_t n);
    // Anything but AdamW wrote bytes at p: copies overlapping them are stale.
    void written(const void* p, std::size_t bytes);

private:
    struct Range {
        const float* params;
        std::int64_t n;
        std::unique_ptr<CudaBackend::Scratch> copy;
        bool valid = false;
        std::int64_t asked = 0;  // elements asked for since the last update
    };
    struct Ask {
        const float* w;
        std::int64_t n, asked;
    };
    CudaBackend* backend_;
    std::mutex mu_;  // the ranges and asks below
    std::vector<Range> ranges_;
    std::vector<Ask> asks_;  // outside every known range
};

}  // namespace fp8scope::cuda
