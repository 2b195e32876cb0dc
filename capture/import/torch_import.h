// A PyTorch capture folder (torch_capture.h) as a trace: every captured operand goes
// through the engine's own capture sink (StatsCapture) in the order and orientation the
// engine's linears hand them over (fprop x, w; dgrad dy, w^T; wgrad dy^T, x^T), so the
// figures, block maps and what-if quantizers are those a run of the engine records; each
// GEMM's output error comes from the engine's casts and GEMMs (gemm_replay.h).
//
// Runs of the trace: run 0 is the captured run (recipe baseline: its operands are the
// unquantized tensors, every quantizer a what-if), with the loss and step time the run
// reported. Each replay recipe adds a run that reads the same tensors as that recipe
// would cast them: its quantizer in use per operand and, for delayed scaling, an amax
// history over the captured steps (the scale each capture step would have cast with had
// only the captured steps been seen; every step when captured with every=1). Replays have
// no loss of their own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.h"
#include "fp8/recipe.h"
#include "stats_capture.h"
#include "torch_capture.h"
#include "trace_records.h"

namespace fp8scope::import {

struct TorchImportOptions {
    std::vector<std::string> replays = {"delayed"};  // training recipes, not baseline
    std::vector<Recipe> quantizers = what_if_recipes();  // analysed for every operand
    std::int64_t blockmap_every = -1;  // -1: 10 x the capture interval; 0: never
    // Each GEMM's output error (gemm_replay.h): three GEMMs per linear and run, three more
    // where the run quantizes; only for a linear whose x, w and dy were all captured.
    bool output_errors = true;
    trace::StatsCaptureOptions capture;
    std::string tool_version;
};

// The trace metadata of an import: the capture's linears, the runs above, every quantizer
// those runs cast with and the capture interval. Throws std::invalid_argument naming an
// unknown replay recipe (or baseline, which run 0 already is).
trace::TraceMeta torch_import_meta(const TorchCapture& capture, const TorchImportOptions& options,
                                   const std::string& machine);

// Writes the steps of a capture into `sink` (records fitting torch_import_meta's meta),
// analysing on `backend`: for each step in order, its operands (the files of one linear
// at a time in memory), then one StepRecord per run. It keeps the delayed histories
// between calls, so a capture that grows (a run still writing it) is imported in parts.
class TorchImporter {
public:
    TorchImporter(const trace::TraceMeta& meta, const TorchImportOptions& options, Backend& backend,
                  trace::RecordSink& sink);
    ~TorchImporter();

    // The steps of `capture` after the last one imported, up to `last` (inclusive).
    // `progress` (may be empty) is told each captured step as it is done. Throws
    // CaptureError for a file that does not match the manifest, or a capture whose
    // linears are not the meta's.
    void import_steps(const TorchCapture& capture, std::int64_t last,
                      const std::function<void(std::int64_t step)>& progress = {});
    std::int64_t last_step() const { return last_; }  // 0: none yet

    // The last step whose files are all written: every step the manifest reports (the
    // writer lists a step after its files), or every step once the capture is complete.
    static std::int64_t settled_step(const TorchCapture& capture);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
    std::int64_t last_ = 0;
};

// The whole capture at once.
void import_torch_capture(const TorchCapture& capture, const TorchImportOptions& options,
                          const trace::TraceMeta& meta, Backend& backend, trace::RecordSink& sink,
                          const std::function<void(std::int64_t step)>& progress = {});

}  // namespace fp8scope::import
