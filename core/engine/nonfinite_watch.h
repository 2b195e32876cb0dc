// The first non-finite value of a training run: which step, linear, GEMM, operand and
// scaling block held a NaN or Inf first. Every training cast's input is scanned on the
// device (NonFiniteOps::find_nonfinite) under a tag of its own; one 64-bit word in backend
// memory keeps the smallest (tag, element) found, so only the first sticks. The host reads
// the word where the step waits for the device anyway (stage() before the gradient norm is
// read back, poll() after): a clean step adds no synchronization, one kernel per cast on a
// GPU and one read of each operand. A step whose loss goes non-finite reads it at once
// (read_now()), on the failure path.
//
// "First" is program order: the forward's casts layer by layer, then the backward's. The
// block is the scaling block of the rowwise copy the operand's first GEMM reads (fprop for
// x and w, dgrad for dy) under the recipe of that GEMM; per-tensor and unquantized casts
// have none and name the element's row and column only.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "backend.h"
#include "operands.h"

namespace fp8scope {

struct NonFiniteRecord {
    enum class Source : std::uint8_t { Operand, Loss, Gradient };
    Source source = Source::Operand;
    std::int64_t step = 0;       // 1-based: the step that held it
    int rank = 0;                // of a data-parallel job
    int run = 0;                 // of the trainer's lock-step runs
    // Source::Operand only:
    int layer = -1, linear = -1;
    std::string linear_name, recipe;
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
    std::int64_t rows = 0, cols = 0;     // the operand's shape
    std::int64_t row = -1, col = -1;     // its first non-finite element
    int block_rows = 0, block_cols = 0;  // the scaling block; 0 x 0: per tensor or unquantized
    std::int64_t block = -1;             // the block's index in the row-major block grid; -1: none

    // One line: "step 7, rank 0, run 0: operand dy of blocks.1.mlp.fc2 (layer 1, linear 7),
    // dgrad, element (12, 345), block 38 (1x128 blocks)".
    std::string describe() const;
};

const char* nonfinite_source_name(NonFiniteRecord::Source s);  // "operand", "loss", "gradient"

// What a scan site is: the operand and how its first GEMM's copy is blocked.
struct NonFiniteSite {
    std::int64_t step = 0;
    int layer = 0, linear = 0;
    std::string linear_name, recipe;
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
    std::int64_t rows = 0, cols = 0;
    int block_rows = 0, block_cols = 0;
};

class NonFiniteWatch {
public:
    explicit NonFiniteWatch(Backend& backend);

    // Scans `values` (the operand as its cast reads it) on the backend's stream. Nothing is
    // scanned once a record is known: the first one is.
    void check(const TensorDesc& values, NonFiniteSite site);
    // Before a call that waits for the device: queue the word's copy to the host.
    void stage();
    // After that call: the record, the first time it shows; nullopt otherwise.
    std::optional<NonFiniteRecord> poll();
    // Waits for the device and reads the word now (the failure path, a checkpoint).
    std::optional<NonFiniteRecord> read_now();
    const std::optional<NonFiniteRecord>& found() const { return found_; }

    // The watch between two steps, and back to it: a step whose scans must not count
    // (runs that went at once with a run whose failure ends the step before their turn, as
    // if they had not run). The word goes back to clean, as it is between steps until a
    // record is known.
    struct Mark {
        std::deque<NonFiniteSite> sites;
        std::uint32_t base = 0, next = 0, staged_next = 0;
        std::optional<NonFiniteRecord> found;
    };
    Mark mark() const { return {sites_, base_, next_, staged_next_, found_}; }
    void back_to(const Mark& m);

private:
    std::optional<NonFiniteRecord> resolve(std::uint64_t word, std::uint32_t clean_below);

    Backend& backend_;
    DeviceBuffer<std::uint64_t> word_;
    std::deque<NonFiniteSite> sites_;  // tags [base_, next_) not yet known clean
    std::uint32_t base_ = 0, next_ = 0, staged_next_ = 0;
    std::optional<NonFiniteRecord> found_;
};

}  // namespace fp8scope
