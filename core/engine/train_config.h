// Everything a training run is made of, as one value: model shape, optimizer, learning
// rate schedule, data, batch shape, seed, evaluation, checkpoints, rewind, capture and
// data parallel.
// JSON is the file format (the section and field names below are the JSON names);
// loading is strict: an unknown field, a wrong type or a value out of range is an error
// that names the field and the value. Any field can be overridden by its dotted path
// ("model.d_model=192"), which goes through the same validation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/injection.h"
#include "engine/model_config.h"
#include "fp8/precision_plan.h"

namespace fp8scope {

// How the learning rate and the initial weights follow the model's width (d_model):
// `constant` takes optimizer.lr and model.init_std as they are; `width` (muP-style, the
// rule of docs/models.md) reads them as tuned at optimizer.base_width and scales
// the peak and final learning rates by base_width / d_model and the std of the blocks'
// matrices (and an untied head's) by sqrt(base_width / d_model).
enum class LrRule { Constant, Width };

struct OptimizerConfig {       // AdamW on float32 master weights
    float lr = 3e-3f;          // peak learning rate (at base_width under lr_rule width)
    float beta1 = 0.9f;
    float beta2 = 0.95f;
    float eps = 1e-8f;
    float weight_decay = 0.1f; // decoupled, on decay parameters only
    float grad_clip = 1.0f;    // max global gradient norm; 0: no clipping
    LrRule lr_rule = LrRule::Constant;
    int base_width = 256;      // the width lr and model.init_std were tuned at (lr_rule width)
};

struct ScheduleConfig {        // linear warmup, then cosine down to min_lr
    int warmup_steps = 30;
    float min_lr = 3e-4f;
};

struct DataConfig {
    // "builtin" (the synthetic corpus), "text:PATH" (bytes, vocab 256), "tokens:PATH"
    // (GPT-2 style uint16 token file), or a bare PATH (".bin" files are token files).
    std::string source = "builtin";
    double val_fraction = 0.1;               // tail of the data held out for eval loss
    std::int64_t corpus_bytes = 1 << 21;     // size of the builtin corpus
    std::uint64_t corpus_seed = 20240520;    // the builtin corpus is fixed, not the run seed
};

struct EvalConfig {
    int every = 100;           // eval loss every N steps (and after the last); 0: only at the end
    int batches = 16;          // held-out batches per evaluation (16k tokens at the defaults)
};

struct CheckpointConfig {
    std::string dir;           // where periodic checkpoints go; empty: none on disk
    int every = 0;             // steps between checkpoints on disk; 0: only at the end (with dir)
    std::string resume;        // checkpoint file to resume from; empty: fresh start
};

struct RewindConfig {
    bool enabled = true;
    float spike_factor = 3.0f; // loss > factor * moving average of recent losses: a spike
    int window = 20;           // losses in the moving average (spikes checked once full)
    int snapshot_every = 25;   // steps between in-memory snapshots of the last good state
    int max_rewinds = 8;       // give up (stop with an error) after this many
};

// A run as one rank of a data-parallel job (a launcher's or --nproc-per-node's ranks);
// ignored by a job of one.
struct DataParallelConfig {
    double rank_timeout_s = 300;     // joining, and any step waiting for another rank
    double bucket_mb = 25;           // gradient bucket in MiB of grad_dtype (DDP's default)
    std::string grad_dtype = "f32";  // gradient sums travel in f32, bf16, e4m3 or e5m2
    int grad_measure_every = 100;    // steps between measurements of the error a compressed sum adds
    double straggler_margin = 0.10;  // slower than the median compute time by more than this: slow
    int straggler_steps = 3;         // slow this many steps in a row: a straggler
    bool preflight = false;          // time a GEMM on every rank and an all-reduce before training
    int preflight_size = 0;          // pre-flight GEMM n (0: 8192 on a GPU, 256 on a CPU)
    double preflight_margin = 0.10;  // pre-flight: slower than the median GEMM by more than this: slow
    bool exclude_slow = false;       // pre-flight: slow ranks (never rank 0) leave the job
    // A lost rank (never rank 0) is left behind: the others go on from the last snapshot
    // they all hold, with the same global batch (docs/elastic.md). Off by default.
    bool elastic = false;
};

struct TrainConfig {
    ModelConfig model;
    OptimizerConfig optimizer;
    ScheduleConfig schedule;
    DataConfig data;
    EvalConfig eval;
    CheckpointConfig checkpoint;
    RewindConfig rewind;
    DataParallelConfig data_parallel;

    std::string device = "cpu";          // backend: "cpu" or "cuda"
    std::string recipe = "baseline";     // training recipe of a single run
    std::vector<std::string> compare;    // lock-step runs; non-empty overrides `recipe`
    // Custom recipes, by name: a built-in recipe with per-linear overrides
    // (fp8/precision_plan.h), usable wherever a recipe name is.
    std::vector<CustomRecipe> recipes;
    int steps = 600;
    int batch_size = 16;                 // B
    int seq_len = 64;                    // T
    std::uint64_t seed = 1;
    // Every recipe trained with seeds seed .. seed + seeds - 1, paired: the runs of one seed
    // share initial weights and batches. Written to JSON only when not 1.
    int seeds = 1;
    int threads = 0;                     // 0: all hardware threads
    // On a backend with lanes (CUDA), the runs of a step go at once, one stream and host
    // thread each (Trainer); off: one after another. Results are the same bit for bit.
    // Written to JSON only when off.
    bool concurrent_runs = true;
    int capture_every = 0;               // capture GEMM operands every N steps; 0: never
    std::int64_t blockmap_every = -1;    // a trace's block maps every N steps; -1: 10 x capture_every
    int log_every = 10;                  // plain progress lines every N steps
    // Outlier injection for stress tests (engine/injection.h): the same in every run.
    std::vector<Injection> inject;
    // A Hugging Face checkpoint (engine/pretrained.h) every run starts from: a .safetensors
    // file or a folder of them. Its shape replaces the model section's (resolve_init_from).
    std::string init_from;

    // The recipes of the runs: `compare` if set, else {recipe}; each `seeds` times in a row.
    std::vector<std::string> run_recipes() const;
    // The seed of run `run`: seed + run % seeds (initial weights, batches, rounding).
    std::uint64_t run_seed(int run) const { return seed + std::uint64_t(run % seeds); }
    // The recipe names the runs may use: the built-in ones and `recipes`.
    RecipeBook recipe_book() const { return RecipeBook(recipes); }
    // Cross-field checks (seq_len <= model.max_seq, injections against the model's
    // linears, ...); throws std::invalid_argument.
    void validate() const;

    // The learning rates and init the run uses, after optimizer.lr_rule.
    float peak_lr() const;          // optimizer.lr, scaled under lr_rule width
    float final_lr() const;         // schedule.min_lr, scaled alike
    float hidden_init_std() const;  // model.init_std, scaled under lr_rule width
};

// The width rule's numbers (docs/models.md, "Width rule"): a peak Adam learning rate
// of kWidthRuleLr tuned at width kWidthRuleBase, scaled by kWidthRuleBase / d_model.
constexpr int kWidthRuleBase = 256;
constexpr float kWidthRuleLr = 2e-3f;
// A peak learning rate this many times the rule's at its width is likely to blow up.
constexpr float kWidthRuleMargin = 4.0f;
// The rule's peak learning rate at width d_model: kWidthRuleLr * kWidthRuleBase / d_model.
float width_rule_lr(int d_model);
// A one-line warning when config.peak_lr() is above kWidthRuleMargin times the rule's
// learning rate at its d_model, naming the rule and the suggested lr; empty otherwise.
std::string lr_warning(const TrainConfig& config);

// Presets: named configs (resources/configs/presets/NAME.json) of the shapes people know.
// The folders searched, in order: $FP8SCOPE_PRESETS when set, `installed` (the program's
// own), and `source` (the source tree's, for a build that was not installed).
std::vector<std::string> preset_dirs(const std::string& installed, const std::string& source);
// The names (file names without .json) in the first of `dirs` that exists, sorted.
std::vector<std::string> list_presets(const std::vector<std::string>& dirs);
// The preset's file; throws std::invalid_argument naming the preset and the names there are.
std::string find_preset(const std::string& name, const std::vector<std::string>& dirs);

// Throws std::invalid_argument naming the field and value. `origin` (a file name) is put
// in front of the message. A config read back from a checkpoint or trace keeps the model
// it recorded; load_train_config and apply_override(s), which read what a user gives,
// resolve init_from (below) before the checks across fields.
TrainConfig train_config_from_json(std::string_view json_text, std::string_view origin = "");
TrainConfig load_train_config(const std::string& path);
std::string train_config_to_json(const TrainConfig& config);  // pretty, every field

// The first field, in the order a config file lists them, whose value differs between two
// configs: its dotted path ("model.n_head") and both values as JSON; none when they agree.
struct ConfigDifference {
    std::string field, a, b;
};
std::optional<ConfigDifference> first_difference(const TrainConfig& a, const TrainConfig& b);

// "model.d_model=192": the value is JSON ("192", "true", "[\"a\"]") or, when it does not
// parse as JSON, a plain string ("rmsnorm"). Throws std::invalid_argument naming the path.
void apply_override(TrainConfig& config, std::string_view assignment);
// Several at once, as a command line gives them: each is checked on its own, the checks
// across fields (seq_len <= model.max_seq, ...) once all are applied, so their order
// does not matter.
void apply_overrides(TrainConfig& config, const std::vector<std::string>& assignments);

// With init_from set: the model section takes the checkpoint's shape, kinds and head
// count (n_head from config.json beside it, else the model section's). Reads the
// checkpoint's headers, not its weights; throws naming the file or tensor. Notes on what
// the engine does differently from config.json go to `notes` when given.
void resolve_init_from(TrainConfig& config, std::vector<std::string>* notes = nullptr);

}  // namespace fp8scope
