// A backend's optimizer ops: what a step does with the gradients after backward: their
// FP8 sums across data-parallel ranks, the global norm and clipping's scale, and AdamW.
// Parameters, gradients and AdamW's moments are float32 on every backend.
#pragma once

#include <cstdint>
#include <vector>

#include "fp8/chunks.h"
#include "fp8/format.h"

namespace fp8scope {

// Where AdamW's weight decay applies: parameters [begin, end) of the flat array. A list of
// runs is sorted and disjoint (check_decay_runs); outside every run nothing decays.
struct DecayRun {
    std::int64_t begin = 0, end = 0;
    bool operator==(const DecayRun& o) const { return begin == o.begin && end == o.end; }
};

// Throws std::invalid_argument naming the first run that is empty, out of [0, n), or not
// after the run before it.
void check_decay_runs(const std::vector<DecayRun>& runs, std::int64_t n);

struct AdamWParams {
    float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0;
    float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^t, rounded once
    // Each gradient is first multiplied by this (gradient clipping's factor), in the same
    // pass: the same bits as scaling the gradients beforehand, one read and write fewer.
    float grad_scale = 1;
};

class OptimizerOps {
public:
    virtual ~OptimizerOps() = default;

    // AdamW on n float32 parameters; weight decay applies inside the `decay` runs (host
    // memory, check_decay_runs) and nowhere else.
    virtual void adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay,
                       std::int64_t n, const AdamWParams& p) = 0;
    // Global L2 norm of n gradients, bitwise the same for any thread count (waits).
    virtual double grad_norm(const float* grads, std::int64_t n) = 0;
    virtual void scale(float* x, float factor, std::int64_t n) = 0;

    // FP8 gradient sums (fp8/chunks.h). slots (layout.bytes()) = x (layout.n) cast to
    // `format` chunk by chunk, each chunk with the power-of-two scale of its own amax,
    // written into its slot's header.
    virtual void quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format) = 0;
    // out (n) = the sum over k < count of the first n values of slot k (slots `slot_bytes`
    // apart), each decode(code) * scale_inv, added in float32 in the order of k: the same
    // bits on every backend (a NaN may differ in its payload).
    virtual void dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                                Format format) = 0;
};

}  // namespace fp8scope
