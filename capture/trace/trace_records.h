// The trace data model: what a run records, in plain structs shared by the HDF5 writer,
// the reader, the live stream and the GUI's series store. Live streaming and file loading
// produce the same records, so views never know which one they are reading.
//
// Run -> step -> linear layer -> GEMM (fprop, dgrad, wgrad) -> operand (x, w, dy).
// A run trains under a recipe (baseline, delayed, mxfp8, ...), which gives each operand a
// quantizer (current_e4m3, block1x128_e4m3_pow2, ...): how that tensor is scaled and cast.
// Names (runs, linears, recipes, quantizers, ops) are stored once in the metadata and referred to by
// id (their index), because an HDF5 file in SWMR mode cannot append strings.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "fp8/stats.h"
#include "operands.h"
#include "run_events.h"

namespace fp8scope::trace {

constexpr int kFormatVersion = 7;

// A trace file that cannot be written or read; the message names the file and the problem.
class TraceError : public std::runtime_error {
public:
    TraceError(const std::string& path, const std::string& problem)
        : std::runtime_error(path + ": " + problem), path_(path) {}
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();  // "not computed"

struct RunInfo {
    std::string name;    // "baseline", "delayed", ...: one run of a lock-step comparison
    std::string recipe;  // training recipe it started with
};

// The precision one GEMM of a run's linear ran under, from the run's precision plan
// (fp8/precision_plan.h): the training recipe it followed and the quantizers of its two
// operands, A and B of gemm_operands (fprop x, w; dgrad dy, w; wgrad dy, x); "" for an
// operand kept in high precision. Recorded for the recipe each run started with.
struct GemmPrecision {
    std::int32_t run = 0;
    std::int32_t linear = 0;
    Gemm gemm = Gemm::Fprop;
    std::string recipe, a, b;
    std::int32_t overridden = 0;  // 1: an override of the run's recipe set this GEMM's recipe
};

// One index of an outlier injection of the run's config (engine/injection.h), the same in
// every run: entry is its place in the config's "inject" list.
struct InjectionRecord {
    std::int32_t entry = 0;
    std::int64_t step = 0;
    std::int64_t until = -1;    // the last step scaled; -1: to the end
    std::int32_t layer = -1;    // -1: every block
    std::string linear;         // the name pattern within a block ("mlp.fc2")
    Operand operand = Operand::X;
    std::int32_t rows = 0;      // 1: index is a row, 0: a channel (column)
    std::int64_t index = 0;
    double scale = 1;
};

// Written before appending starts; fixed for the life of the trace.
struct TraceMeta {
    int format_version = kFormatVersion;
    std::string tool_version;
    std::string created;            // ISO 8601 UTC
    std::string machine;            // host, CPU or GPU
    std::string config_json;        // the run's full configuration
    std::vector<RunInfo> runs;
    std::vector<LinearInfo> linears;
    std::vector<std::string> quantizers;        // analysis (shadow) quantizers; an id is an index
    std::vector<std::string> training_recipes;  // recipe names (/meta/recipes); an id is an index
    std::vector<std::string> ops;               // op and kernel names; an id is an index
    std::int64_t capture_every = 0;             // operand statistics every N steps
    std::int64_t blockmap_every = 0;            // block maps every N steps (0: never)
    // Which process of a data-parallel job wrote the trace (rank 0 also keeps every rank's
    // RankStepRecords); a single process is rank 0 of 1.
    int rank = 0;
    int world_size = 1;
    // The type a data-parallel job's gradient sums travelled in (--grad-dtype): "f32",
    // "bf16", "e4m3" or "e5m2". Empty for a single process and in traces from before it
    // was recorded; it does not change within a run.
    std::string grad_dtype;
    // The baseline: the run whose recipe (the one it started with) quantizes nothing, the
    // reference of a comparison; -1 for none. kNotRecorded in traces from before it was
    // recorded: baseline_of() then applies the rule to the runs' recipes.
    int baseline_run = kNotRecorded;
    static constexpr int kNotRecorded = -2;
    // Every run's linears x GEMMs (/meta/precision); empty in traces from before it was
    // recorded, where each run's recipe covered every GEMM.
    std::vector<GemmPrecision> precision;
    // The config's outlier injections, a row per index (/meta/injections); empty without
    // injections and in traces from before they were recorded.
    std::vector<InjectionRecord> injections;
    // Which steps keep their individual kernel records (/ops) beside the per-step sums
    // every step gets (/kernel_steps): "all", "capture" (capture steps and windows around
    // events), "every=N", "off"; empty in traces from before kernel timing was windowed
    // (format 5 and older), which kept every record. kernel_window: the steps before and
    // after an event whose records are kept.
    std::string kernel_timings;
    std::int64_t kernel_window = 0;
};

// The rows of `precision` of one run, indexed linear * 3 + gemm; empty when not recorded.
std::vector<GemmPrecision> run_precision(const TraceMeta& meta, int run);

// The first run whose recipe quantizes nothing, by this build's recipe table; -1 for none.
int baseline_by_recipe(const std::vector<RunInfo>& runs);
// The trace's baseline run as recorded, else by recipe; -1 for none.
int baseline_of(const TraceMeta& meta);

struct StepRecord {
    std::int32_t run = 0;
    std::int64_t step = 0;
    double loss = kNone;
    double eval_loss = kNone;  // NaN unless computed at this step
    double lr = kNone;
    double grad_norm = kNone;
    double step_ms = kNone;  // forward + backward + optimizer of this run
    double tokens_per_s = kNone;
    std::int32_t recipe = -1;  // training recipe id in use for this step
};

// One rank's share of a data-parallel step (core's RankStepRecord): where the step's time
// went on that rank, so a slow GPU, link or host stands out against the other ranks.
struct RankStepRecord {
    std::int64_t step = 0;
    std::int32_t rank = 0;
    double compute_ms = kNone;  // forward + backward until the device finished them
    double comm_ms = kNone;     // then waiting for the gradient all-reduces
    double step_ms = kNone;     // the whole step on this rank
    double loss = kNone;        // this rank's own loss of run 0
    double grad_bytes = kNone;  // bytes this rank put into the step's gradient sums
    double grad_error = kNone;  // relative L2 error compressed sums added (NaN: not measured)
    // FP8 sums against a BF16 shadow sum of the same sample, where measured (NaN otherwise):
    double grad_snr_db = kNone;         // SNR in dB (+Inf: equal)
    double grad_underflow_pct = kNone;  // nonzero shadow sums the FP8 sums made 0
    double grad_overflow_pct = kNone;   // finite shadow sums the FP8 sums made NaN or Inf
};

using fp8scope::EventKind;
using fp8scope::event_kind_name;


struct EventRecord {
    std::int32_t run = 0;  // -1: the whole (lock-step) run
    std::int64_t step = 0;
    EventKind kind = EventKind::Start;
    std::string detail;  // at most kEventDetailChars characters are kept
};
constexpr int kEventDetailChars = 255;

struct OperandKey {
    std::int32_t run = 0;
    std::int64_t step = 0;
    std::int32_t linear = 0;
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
};

// One GEMM operand at a capture step: its statistics, and its quantization error under
// the quantizer in use and under every shadow quantizer (the what-if comparison).
struct OperandRecord {
    OperandKey key;
    std::int32_t quantizer_in_use = -1;  // id into TraceMeta::quantizers; -1 when unquantized
    double scale = kNone;                // per-tensor scale in use (NaN for block quantizers)
    TensorStats stats;                // incl. histogram, channel absmax and top values
    std::vector<ErrorStats> errors;   // one per TraceMeta::quantizers, same order
    std::vector<float> amax_history;  // delayed scaling's window, oldest first
};

// Amax and scale in use of every operand of every linear layer at one step: dense and
// cheap, recorded every step so amax spikes that delayed scaling misses are visible.
// Index with operand_slot().
struct ScalingRecord {
    std::int32_t run = 0;
    std::int64_t step = 0;
    std::vector<float> amax;   // (n_linears * kOperandsPerLinear)
    std::vector<float> scale;  // per-tensor scale in use; NaN for block quantizers / unquantized
};

// Each GEMM has two operands: fprop (x, w), dgrad (dy, w), wgrad (dy, x).
constexpr int kOperandsPerLinear = 6;
int operand_slot(int linear, Gemm gemm, Operand operand);  // -1 if the GEMM has no such operand

// Per-tile maps of one operand under one quantizer at a block-map step. All quantizers of an
// operand share one tile grid, so their heatmaps line up with one colour scale.
struct BlockMapRecord {
    OperandKey key;
    std::int32_t quantizer = 0;        // id into TraceMeta::quantizers
    std::int64_t rows = 0, cols = 0;   // the operand
    std::int32_t tile_rows = 0, tile_cols = 0;
    std::int32_t grid_rows = 0, grid_cols = 0;
    std::vector<float> absmax;         // (grid_rows, grid_cols): max |x| per tile
    std::vector<float> scale_inv;      // the quantizer's scale_inv covering each tile (max)
    std::vector<float> sqnr_db;        // quantization SQNR per tile
};

// The error of one GEMM's output at a capture step: the GEMM of the cast operands against
// the same GEMM of the unquantized ones (the backend's high-precision GEMM: float32 on the
// CPU, BF16 inputs with float32 accumulation on a GPU). A GEMM with no quantized operand
// is its own reference: no error, SQNR +inf.
struct GemmErrorRecord {
    std::int32_t run = 0;
    std::int64_t step = 0;
    std::int32_t linear = 0;
    Gemm gemm = Gemm::Fprop;
    double sqnr_db = kNone;      // 10 log10(sum ref^2 / sum (out - ref)^2)
    double rel_err = kNone;      // ||out - ref|| / ||ref||
    double max_abs_err = kNone;  // max |out - ref|
};

// How far the gate and up projections of one SwiGLU MLP have aligned at a capture step
// (stats/gate_up_alignment.h, from fc1's weight as the step's fprop read it), with the down
// projection's input channel amax of the channel most likely to make its outliers (since
// format 7).
struct GateUpAlignmentRecord {
    std::int32_t run = 0;
    std::int64_t step = 0;
    std::int32_t linear = 0;       // the MLP's fc1 (gate and up): TraceMeta::linears
    std::int64_t channels = 0;     // H, the hidden width
    double mean_abs_cos = kNone;   // over the channels' |cos(gate row, up row)|
    double p99_abs_cos = kNone;
    double max_abs_cos = kNone;
    std::int64_t aligned = 0;      // channels with |cos| > 0.9
    std::int64_t top_channel = -1;  // the largest |cos| x ||gate row|| ||up row||
    double top_cos = kNone;         // its cos, signed
    double top_norm_product = kNone;
    double top_down_amax = kNone;     // fc2's input: max |x| of that channel (NaN: not captured)
    double down_amax_median = kNone;  // and the median over its channels
};

// What an OpRecord times: an op's host code, or what a device ran (kernel timing).
enum class OpKind : std::int32_t { Host = 0, Kernel = 1, Memcpy = 2, Memset = 3 };
const char* op_kind_name(OpKind k);  // "host", "kernel", "memcpy", "memset"

// A timed op (host) or kernel, copy or memset (device) of a step, on the host's clock.
struct OpRecord {
    std::int32_t run = 0;
    std::int64_t step = 0;
    std::int32_t op = 0;       // id into TraceMeta::ops: the op, or the kernel's name
    std::int32_t linear = -1;
    std::int32_t layer = -1;
    std::int32_t device = -1;  // -1: CPU
    std::int32_t stream = 0;   // CPU: thread
    std::int64_t start_ns = 0, end_ns = 0;
    OpKind kind = OpKind::Host;
    std::int32_t parent = -1;   // a device record: id of the op it ran in ("fprop", "capture"), -1 none
    std::int32_t operand = -1;  // the operand a quantize (or capture) op handled (Operand), -1 none
    std::int64_t bytes = 0;     // copies and memsets
};

// The device records of one run's step summed per kernel name, the op it ran in and
// record kind (/kernel_steps, since format 6): written every step, so statistics over
// the run cover every step, also where the individual records (OpRecord) were not kept.
// Records launched outside every op are given to their run by time, as the Kernels view
// does (kernel_steps.h).
struct KernelStepRecord {
    std::int32_t run = 0;
    std::int64_t step = 0;
    std::int32_t op = 0;        // id into TraceMeta::ops: the kernel's name
    std::int32_t parent = -1;   // the op it ran in, -1 none
    OpKind kind = OpKind::Kernel;
    std::int32_t detailed = 0;  // 1: this step's individual records are in /ops too
    std::int64_t count = 0;
    std::int64_t total_ns = 0, min_ns = 0, max_ns = 0;  // device time of the calls
    std::int64_t bytes = 0;     // copies and memsets
};

// An op or kernel name that appeared after the trace started (CUPTI kernel names are not
// known in advance): it becomes TraceMeta::ops[id]; ids are handed out in order.
struct OpNameRecord {
    static constexpr std::size_t kMaxLength = 128;  // the trace's fixed-size string column
    std::int32_t id = 0;
    std::string name;
};

// Any record, as queued for the writer and sent over the live stream.
using Record = std::variant<StepRecord, EventRecord, ScalingRecord, OperandRecord, BlockMapRecord,
                            OpRecord, OpNameRecord, RankStepRecord, GemmErrorRecord, KernelStepRecord,
                            GateUpAlignmentRecord>;

// Where records go: the trace writer, the live server, or both.
class RecordSink {
public:
    virtual ~RecordSink() = default;
    // Thread-safe. Throws std::invalid_argument for a record that does not fit the meta.
    virtual void write(Record record) = 0;
};

// Empty when the meta's own figures hold (rank within world_size); otherwise what is wrong.
std::string check_meta(const TraceMeta& meta);

// Empty when `record` fits `meta` (ids in range, vector sizes consistent); otherwise what
// is wrong, naming the field and the value. `ops` is the number of op names known so far.
std::string check_record(const TraceMeta& meta, std::size_t ops, const Record& record);

}  // namespace fp8scope::trace
