// The capture sink a run's Model reports to. Every cast's amax and scale in use are
// recorded (one ScalingRecord per step: they come free with the cast); at capture steps it
// also gets the full statistics of FP8.md and its error under every trace recipe
// (OperandRecord), the error of each GEMM's output (GemmErrorRecord) and, for a SwiGLU MLP,
// how far its gate and up rows aligned (GateUpAlignmentRecord, from fc1's weight, with the
// channel amax of fc2's input), and at block-map steps per-tile maps on one tile grid for
// every recipe (BlockMapRecord). Op timings become OpRecords. The figures are computed on the
// calling (training) thread; records go to a RecordSink, whose writer thread does the I/O.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/capture_sink.h"
#include "fp8/analysis.h"
#include "trace_records.h"

namespace fp8scope::trace {

// Op and kernel names to ids, shared by every run of a trace. A new name is sent as
// an OpNameRecord before its first use.
class OpNames {
public:
    explicit OpNames(const std::vector<std::string>& known);
    std::int32_t id(std::string_view name, RecordSink& sink);

private:
    std::mutex mu_;
    std::unordered_map<std::string, std::int32_t> ids_;
};

// The op names the CPU engine reports, in a fixed order: their ids need no OpNameRecord.
std::vector<std::string> default_op_names();

// The recipes a trace analyses: `analysis` plus every operand quantizer (and its rowwise
// copy's, rowwise_quantizer) of every named training recipe and of the runs' recipes
// `runs`, so the quantizer in use (and any named recipe a run may switch to) has an id.
std::vector<std::string> trace_recipe_names(const std::vector<Recipe>& analysis,
                                            const std::vector<std::string>& runs = {});

struct StatsCaptureOptions {
    StatsOptions stats;  // outlier k, top-k, threads
};

class KernelRecorder;

class StatsCapture : public CaptureSink {
public:
    // `meta.quantizers` must name parseable recipes (trace_recipe_names()).
    StatsCapture(int run, const TraceMeta& meta, RecordSink& sink, OpNames& ops, StatsCaptureOptions options = {});

    // Before the step's forward pass: full statistics when `full`, maps when `blockmaps`.
    // Sends the previous step's ScalingRecord if end_step() was not called (a rewind).
    void begin_step(std::int64_t step, bool full, bool blockmaps);
    // After the step: sends its ScalingRecord (if any operand was seen).
    void end_step();

    void on_operand(const OperandCapture& operand) override;
    void on_scaling(const OperandScaling& scaling) override;
    // At a capture step: the GEMM's output error (GemmErrorRecord), reduced on its backend.
    void on_gemm_output(const GemmOutputCapture& output) override;
    void on_op(const OpTiming& timing) override;
    // Where op scopes go, for the kernel timings that arrive later (nullptr: nowhere).
    void set_kernel_recorder(KernelRecorder* k) { kernels_ = k; }

private:
    int recipe_id(const Recipe* r) const;
    void note_scaling(int slot, float amax, float scale);  // into this step's ScalingRecord
    void record_blockmaps(const OperandCapture& c, const TileMaps& maps);

    int run_;
    const TraceMeta& meta_;
    RecordSink& sink_;
    OpNames& ops_;
    StatsCaptureOptions options_;
    std::vector<Recipe> recipes_;  // parsed meta_.quantizers
    // A SwiGLU MLP's fc1 (gate and up rows) by its fc2 and the other way round: linears
    // "<block>mlp.fc1" and "<block>mlp.fc2" with fc1's outputs twice fc2's inputs.
    std::map<int, int> swiglu_fc1_of_fc2_, swiglu_fc2_of_fc1_;
    // This capture step's alignments by fc1, sent at the step's end (fc2's channel amax added
    // when its input was captured).
    std::map<int, GateUpAlignmentRecord> alignment_;
    void record_alignment(const OperandCapture& c);
    void add_down_amax(int fc2, const std::vector<float>& channel_absmax);
    // The recipes whose casts depend on orientation (1xN and MX blocks), and their indices.
    std::vector<Recipe> oriented_recipes_;
    std::vector<std::size_t> oriented_;
    // This step's errors per (linear, operand), for the operand's transposed repeat.
    std::map<std::pair<int, int>, std::vector<ErrorStats>> step_errors_;
    std::int64_t step_ = 0;
    bool full_ = false, blockmaps_ = false, pending_ = false;
    ScalingRecord scaling_;
    KernelRecorder* kernels_ = nullptr;
};

// The block map of one recipe from the analysis' tile maps of an operand (rows, cols):
// max |x|, the largest scale_inv covering the tile and the tile's SQNR.
BlockMapRecord block_map_record(std::int64_t rows, std::int64_t cols, const TileMaps& maps, std::size_t recipe);

}  // namespace fp8scope::trace
