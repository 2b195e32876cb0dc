// `fp8scope-engine train`: builds a TrainConfig from defaults, a JSON file or a
// checkpoint, dedicated flags and --set overrides (in that order), trains with a progress
// display and prints each run's final losses. Ctrl-C or SIGTERM stops between steps (and
// writes the final checkpoint when checkpoint.dir is set); a second one kills. With --listen
// the run is served on the live stream for the GUI to follow and steer. Started by a
// launcher or with --nproc-per-node, it is one rank of a data-parallel job (rank_job.h).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backends.h"
#include "commands.h"
#include "engine/checkpoint.h"
#include "engine/trainer.h"
#include "fp8/training_recipe.h"
#include "live_control.h"
#include "local_ranks.h"
#include "rank_job.h"
#include "run_recording.h"
#include "run_seeds.h"
#include "seed_summary.h"
#include "stop_signals.h"
#include "trace_options.h"
#include "train_progress.h"
#include "util/json_input.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

struct TrainOptions {
    std::string config, preset, resume;
    std::vector<std::string> sets;
    std::vector<std::string> keep_high_precision;  // linear name patterns
    std::optional<std::string> device, recipe, compare, data, checkpoint_dir, init_from, concurrent_runs;
    std::optional<long long> steps, batch, seq, seed, seeds, threads, eval_every, capture_every, checkpoint_every, log_every;
    std::optional<double> lr;
    bool print_config = false, json = false, quiet = false;
    bool listen = false;                 // --listen given
    std::vector<std::string> listen_at;  // its value; empty: a default local socket
    std::string token;
    TraceOptions trace;  // --out and its settings
    RankOptions ranks;   // data parallel
};

// The --listen endpoint: a fresh local socket when no value is given.
live::Endpoint listen_endpoint(const TrainOptions& o) {
    if (o.listen_at.empty() || o.listen_at[0].empty()) return live::parse_endpoint("unix:" + live::default_socket_path());
    return live::parse_endpoint(o.listen_at[0]);
}

// Keeps every run's loss curve for the --json summary and the seeds' gap table.
struct History : TrainObserver {
    explicit History(int runs) : loss(static_cast<std::size_t>(runs)), eval(loss.size()), curves(loss.size()) {}
    void on_step(const StepRecord& r) override {
        const auto i = static_cast<std::size_t>(r.run);
        loss[i].push_back(r.loss);
        if (r.eval_loss) eval[i].push_back({{"step", r.step}, {"loss", *r.eval_loss}});
        curves[i].step.push_back(double(r.step));
        curves[i].loss.push_back(r.loss);
        curves[i].eval.push_back(r.eval_loss ? *r.eval_loss : NAN);
    }
    std::vector<std::vector<float>> loss;
    std::vector<nlohmann::json::array_t> eval;
    std::vector<stats::RunLosses> curves;
};

// What a checkpoint resumed from holds: its step, the model it trained and its batch
// (world_size ranks of batch_size rows; world_size 0: not recorded).
struct Resumed {
    std::int64_t step = 0;
    ModelConfig model;
    int world_size = 0, batch_size = 0;
};

// Where presets are looked for: $FP8SCOPE_PRESETS, the installed program's
// share/fp8scope/presets beside its bin/, then the source tree's resources/configs/presets.
std::vector<std::string> presets_here() {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string installed = ec ? "" : (exe.parent_path().parent_path() / "share/fp8scope/presets").string();
#ifdef FP8SCOPE_PRESET_SOURCE
    return preset_dirs(installed, FP8SCOPE_PRESET_SOURCE);
#else
    return preset_dirs(installed, "");
#endif
}

// --preset help: the presets, one a line.
void print_presets() {
    const std::vector<std::string> dirs = presets_here();
    const std::vector<std::string> names = list_presets(dirs);
    if (names.empty()) std::printf("no presets found\n");
    for (const std::string& n : names) std::printf("%s\n", n.c_str());
}

// The base config: the checkpoint's, replaced by --config or --preset when given. Errors are file errors.
TrainConfig base_config(const TrainOptions& o, Resumed& resumed) {
    TrainConfig c;
    if (!o.resume.empty()) {
        TrainState s = load_checkpoint(o.resume);
        c = train_config_from_json(s.config_json, o.resume + " (config)");
        c.checkpoint.resume = o.resume;  // the weights are the checkpoint's: init_from is not read again
        resumed = {s.step, c.model, s.world_size, c.batch_size};
    }
    if (!o.config.empty()) c = load_train_config(o.config);
    if (!o.preset.empty()) c = load_train_config(find_preset(o.preset, presets_here()));
    return c;
}

// --keep-high-precision: the single run's recipe becomes RECIPE+hp, the same with the
// linears that match `patterns` in high precision (an override after the recipe's own).
void keep_high_precision(TrainConfig& c, const std::vector<std::string>& patterns) {
    if (!c.compare.empty())
        throw std::invalid_argument("--keep-high-precision changes the single run's recipe; with --compare, name a "
                                    "custom recipe from the config's recipes in the list instead");
    CustomRecipe kept{c.recipe + "+hp", c.recipe, {}};
    for (const CustomRecipe& r : c.recipes)
        if (r.name == c.recipe) kept = {c.recipe + "+hp", r.base, r.overrides};
    kept.overrides.push_back({patterns, {}, "baseline"});
    c.recipes.push_back(std::move(kept));
    c.recipe = c.recipes.back().name;
    try {
        c.validate();
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string("--keep-high-precision: ") + e.what());
    }
}

// Flags, then --set in order. Errors are usage errors.
void apply_flags(const TrainOptions& o, TrainConfig& c) {
    std::vector<std::string> sets;
    auto set = [&](const std::string& field, const std::string& value) { sets.push_back(field + "=" + value); };
    if (o.device) set("device", *o.device);
    if (o.recipe) set("recipe", *o.recipe);
    if (o.compare) set("compare", *o.compare);
    if (o.data) set("data.source", *o.data);
    if (o.init_from) set("init_from", *o.init_from);
    if (o.steps) set("steps", std::to_string(*o.steps));
    if (o.batch) set("batch_size", std::to_string(*o.batch));
    if (o.seq) set("seq_len", std::to_string(*o.seq));
    if (o.seed) set("seed", std::to_string(*o.seed));
    if (o.seeds) set("seeds", std::to_string(*o.seeds));
    if (o.threads) set("threads", std::to_string(*o.threads));
    if (o.concurrent_runs) set("concurrent_runs", *o.concurrent_runs == "on" ? "true" : "false");
    if (o.lr) set("optimizer.lr", dump_json(nlohmann::json(*o.lr)));
    if (o.eval_every) set("eval.every", std::to_string(*o.eval_every));
    if (o.capture_every) set("capture_every", std::to_string(*o.capture_every));
    else if ((!o.trace.out.empty() || o.listen) && c.capture_every == 0) set("capture_every", std::to_string(kDefaultCaptureEvery));
    if (o.checkpoint_dir) set("checkpoint.dir", *o.checkpoint_dir);
    if (o.checkpoint_every) set("checkpoint.every", std::to_string(*o.checkpoint_every));
    if (o.log_every) set("log_every", std::to_string(*o.log_every));
    if (o.trace.blockmap_every >= 0) set("blockmap_every", std::to_string(o.trace.blockmap_every));
    const std::vector<std::string> ranks = rank_overrides(o.ranks);
    sets.insert(sets.end(), ranks.begin(), ranks.end());
    sets.insert(sets.end(), o.sets.begin(), o.sets.end());
    apply_overrides(c, sets);
    if (!o.keep_high_precision.empty()) keep_high_precision(c, o.keep_high_precision);
    if (!o.resume.empty()) c.checkpoint.resume = o.resume;
}

// Why `config` cannot continue the checkpoint at `path`; empty when it can.
std::string resume_refused(const std::string& path, const Resumed& resumed, const TrainConfig& config) {
    if (config.steps <= resumed.step)  // would train nothing and rewrite the checkpoint
        return "--resume " + path + ": the checkpoint is at step " + std::to_string(resumed.step) + " and steps=" +
               std::to_string(config.steps) + ": nothing to train (steps must be more than " +
               std::to_string(resumed.step) + ")";
    TrainConfig trained = config;  // a model of another shape with as many parameters would load
    trained.model = resumed.model;
    if (const auto d = first_difference(trained, config))
        return "--resume " + path + ": " + d->field + " is " + d->a + " in the checkpoint, " + d->b +
               " now (a checkpoint resumes the model it trained)";
    return {};
}

void report(const std::string& what) { std::fprintf(stderr, "fp8scope-engine: error: %s\n", what.c_str()); }

// Where the weights come from, and what the engine does differently from its config.json.
void print_init_from(const TrainConfig& config) {
    TrainConfig c = config;
    std::vector<std::string> notes;
    resolve_init_from(c, &notes);
    const ModelConfig& m = c.model;
    std::fprintf(stderr, "weights from %s: %d layers, d_model %d, %d heads, d_ff %d, vocab %d, max_seq %d%s\n",
                 c.init_from.c_str(), m.n_layer, m.d_model, m.n_head, m.hidden(), m.vocab_size, m.max_seq,
                 m.tie_embeddings ? ", tied head" : "");
    for (const std::string& n : notes) std::fprintf(stderr, "fp8scope-engine: note: %s\n", n.c_str());
}

// The first NaN/Inf of the run (engine/nonfinite_watch.h); `job_rank`: the rank that held
// the job's first, -1 when no other rank's is known.
nlohmann::json nonfinite_json(const NonFiniteRecord& r, int job_rank) {
    nlohmann::json j = {{"source", nonfinite_source_name(r.source)}, {"step", r.step}, {"rank", r.rank},
                        {"run", r.run}, {"detail", r.describe()}};
    if (job_rank >= 0) j["job_rank"] = job_rank;
    if (r.source != NonFiniteRecord::Source::Operand) return j;
    j.update({{"layer", r.layer},
              {"linear", r.linear},
              {"linear_name", r.linear_name},
              {"recipe", r.recipe},
              {"gemm", gemm_name(r.gemm)},
              {"operand", operand_name(r.operand)},
              {"shape", {r.rows, r.cols}},
              {"element", {r.row, r.col}},
              {"block_shape", {r.block_rows, r.block_cols}},
              {"block", r.block >= 0 ? nlohmann::json(r.block) : nlohmann::json()}});
    return j;
}

void print_table(const TrainSummary& s, const trace::TraceMeta& meta) {
    const RunSummary* first_baseline = nullptr;
    for (const auto& r : s.runs)
        if (quantizes_nothing(r.recipe) && !first_baseline) first_baseline = &r;
    // With several seeds a run is named by its recipe and seed ("mxfp8 s2") and compared
    // with the baseline of its seed.
    const int seeds = trace::run_seeds(meta).per_recipe;
    const bool seeded = seeds > 1;
    std::printf("%-8s %-14s %10s %10s %14s\n", "run", seeded ? "name" : "recipe", "loss", "eval_loss", "eval_vs_base");
    for (std::size_t i = 0; i < s.runs.size(); ++i) {
        const auto& r = s.runs[i];
        const RunSummary* baseline = first_baseline ? first_baseline + i % std::size_t(seeds) : nullptr;
        std::string eval = r.eval_loss ? std::to_string(*r.eval_loss).substr(0, 8) : "-";
        std::string rel = "-";
        if (baseline && baseline->eval_loss && r.eval_loss && &r != baseline) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%+.3f%%", 100.0 * (*r.eval_loss - *baseline->eval_loss) / *baseline->eval_loss);
            rel = buf;
        }
        const std::string& name = seeded ? meta.runs[i].name : r.recipe;
        std::printf("%-8zu %-14s %10.4f %10s %14s\n", i, name.c_str(), r.loss, eval.c_str(), rel.c_str());
    }
}

// Exit status: 0 trained, 1 a file (config, data, checkpoint) or the run failed, 2 bad usage.
// `lost`: the ranks (as launched) an elastic job went on without; `launcher`: the ranks
// --nproc-per-node started, which --restart-lost-ranks starts again.
int run_train(const TrainOptions& o, std::vector<int>* lost = nullptr, LocalRanks* launcher = nullptr) {
    TrainConfig config;
    Resumed resumed;
    try {  // an unknown preset is bad usage, not a bad file
        if (!o.preset.empty()) (void)find_preset(o.preset, presets_here());
    } catch (const std::exception& e) {
        report(e.what());
        return 2;
    }
    try {
        config = base_config(o, resumed);
    } catch (const std::exception& e) {
        report(e.what());
        return 1;
    }
    try {
        apply_flags(o, config);
    } catch (const std::exception& e) {
        report(e.what());
        return 2;
    }
    if (o.print_config) {
        std::printf("%s\n", train_config_to_json(config).c_str());
        return 0;
    }
    if (!o.resume.empty()) {
        if (const std::string why = resume_refused(o.resume, resumed, config); !why.empty()) {
            report(why);
            return 2;
        }
    }
    std::optional<live::Endpoint> endpoint;
    std::string token = o.token;
    if (o.listen) {
        try {
            endpoint = listen_endpoint(o);
        } catch (const std::exception& e) {
            report(e.what());
            return 2;
        }
        if (endpoint->kind == live::Endpoint::Kind::Tcp && token.empty()) token = random_token();
    }
    // Declared before the job: the job's DataParallel keeps buffers in the backend's memory,
    // so the backend must outlive it.
    std::unique_ptr<Backend> backend;
    std::unique_ptr<RankJob> job;
    try {
        job = std::make_unique<RankJob>(o.ranks, config.data_parallel);
        if (launcher && o.ranks.restart_lost > 0) job->set_restart([launcher](int rank) { launcher->restart(rank); });
    } catch (const std::exception& e) {
        report(e.what());
        return 2;
    }
    const bool rank0 = job->env().rank == 0;  // rank 0 stays rank 0 (it cannot be excluded)
    if (const std::string w = lr_warning(config); rank0 && !w.empty())
        std::fprintf(stderr, "fp8scope-engine: warning: %s\n", w.c_str());
    if (!rank0) endpoint.reset();  // the GUI follows rank 0
    std::optional<Trainer> trainer;
    trace::TraceMeta meta;
    try {
        backend = make_backend(config.device, config.threads, job->env().local_rank);
        StepSync* sync = job->join(*backend, config);
        if (job->excluded()) return 0;  // the pre-flight check sent this rank away
        trainer.emplace(config, *backend, sync, job->joined_state());
        job->watch(*trainer);
        const int ranks = job->env().world_size;
        if (rank0 && resumed.world_size > 0 && resumed.world_size != ranks && config.data_parallel.elastic)
            std::fprintf(stderr, "fp8scope-engine: note: --resume %s: trained on %d ranks x batch %d = %d rows a step, "
                                 "now split over %d rank(s) (elastic: the global batch is kept)\n",
                         o.resume.c_str(), resumed.world_size, resumed.batch_size,
                         resumed.world_size * resumed.batch_size, ranks);
        else if (rank0 && resumed.world_size > 0 && resumed.world_size != ranks)  // the same steps, another batch
            std::fprintf(stderr, "fp8scope-engine: note: --resume %s: trained on %d ranks x batch %d = %d rows a step, "
                                 "now %d ranks x batch %d = %d\n",
                         o.resume.c_str(), resumed.world_size, resumed.batch_size,
                         resumed.world_size * resumed.batch_size, ranks, config.batch_size, ranks * config.batch_size);
        meta = trace::run_trace_meta(config, *trainer, kEngineVersion, config.blockmap_every, job->env());
        trace::set_kernel_policy(meta, kernel_policy(o.trace), backend->device());  // the file and the stream say it
    } catch (const std::exception& e) {
        report(job->distributed() ? "rank " + std::to_string(job->env().rank) + ": " + e.what() : e.what());
        return 1;
    }
    const std::string trace_out = job->rank_path(o.trace.out);  // the rank after the pre-flight check
    const bool quiet = o.quiet || !rank0;
    const int runs = trainer->runs();
    TrainProgress progress(config.steps, runs, config.log_every, trainer->steps_done(), quiet);
    History history(runs);
    trainer->add_observer(&progress);
    trainer->add_observer(&history);
    // Before the server binds: a SIGTERM from now on ends the run cleanly (socket removed).
    std::optional<StopOnSignals> signals(std::in_place, *trainer);
    std::unique_ptr<live::LiveServer> server;
    std::optional<trace::RunRecording> recording;
    try {
        if (endpoint) {
            server = std::make_unique<live::LiveServer>(
                *endpoint, token, meta, [&t = *trainer](const live::Command& c) { return live::apply_command(t, c); });
            const std::string at = server->endpoint().to_string();
            if (endpoint->kind == live::Endpoint::Kind::Tcp && o.token.empty())
                std::fprintf(stderr, "fp8scope-engine: listening on %s (token %s)\n", at.c_str(), token.c_str());
            else
                std::fprintf(stderr, "fp8scope-engine: listening on %s\n", at.c_str());
        }
        if (!trace_out.empty() || server) {
            trace::RecordingOptions ro;
            ro.out = trace_out;
            ro.flush_ms = o.trace.flush_ms;
            ro.kernels = kernel_policy(o.trace);
            ro.stop_on_trace_error = o.trace.on_error == "stop";
            ro.on_trace_error = [trace_out](const std::string& error, std::int64_t step, bool stopping) {
                std::fprintf(stderr,
                             "fp8scope-engine: error: %s stopped recording after step %lld (%s); it holds the steps "
                             "of its last flush. %s\n",
                             trace_out.c_str(), static_cast<long long>(step), error.c_str(),
                             stopping ? "Training stops at the next step (--on-trace-error continue trains on)."
                                      : "Training continues without it.");
            };
            recording.emplace(ro, meta, *trainer, server.get());
            if (!trace_out.empty() && !quiet) std::fprintf(stderr, "trace: %s\n", trace_out.c_str());
        }
    } catch (const std::exception& e) {
        report(e.what());
        return 1;
    }
    if (!quiet) {
        if (job->distributed())
            std::fprintf(stderr, "data parallel: %s, %d x batch %d, %s\n", job->env().describe().c_str(),
                         job->env().world_size, config.batch_size, job->communicator()->describe().c_str());
        std::fprintf(stderr, "training %d run%s (%s) on %s: %lld tokens, %lld held out, %zu parameters each\n",
                     runs, runs == 1 ? "" : "s", dump_json(nlohmann::json(config.run_recipes())).c_str(),
                     trainer->data().data().origin.c_str(), static_cast<long long>(trainer->data().train_tokens()),
                     static_cast<long long>(trainer->data().val_tokens()), trainer->model(0).num_params());
        std::fprintf(stderr, "on %s\n", backend->describe().c_str());
        if (!config.init_from.empty() && config.checkpoint.resume.empty()) print_init_from(config);
    }
    TrainSummary s;
    try {
        s = trainer->run();
    } catch (const std::exception& e) {
        signals.reset();
        progress.finish();
        try {
            if (recording) recording->finish(trainer->steps_done(), e.what());
        } catch (const std::exception& te) {
            report(te.what());
        }
        report(job->distributed() ? "rank " + std::to_string(job->env().rank) + ": " + e.what() : e.what());
        return 1;
    }
    signals.reset();
    progress.finish();
    if (lost) *lost = job->lost_ranks();
    try {
        if (recording) recording->finish(s.steps, s.error.empty() ? (s.stopped ? "stopped" : "done") : s.error);
    } catch (const std::exception& e) {
        report(e.what());
        return 1;
    }
    // A trace that stopped recording is lost work even when training finished.
    const std::string trace_error = recording ? recording->trace_error() : std::string();
    recording.reset();
    server.reset();  // clients see the end of the stream now, not at exit
    // Rank 0 prints the job's summary: the rank that became rank 0 when it was lost, too.
    if (job->env().rank != 0) return s.error.empty() && trace_error.empty() ? 0 : 1;

    const std::optional<trace::SeedGaps> seeds = trace::seed_gaps(meta, history.curves);
    if (o.json) {
        nlohmann::json out = {{"steps", s.steps},      {"rewinds", s.rewinds},        {"stopped", s.stopped},
                              {"error", s.error},      {"trace_error", trace_error}};
        out["runs"] = nlohmann::json::array();
        for (std::size_t i = 0; i < s.runs.size(); ++i) {
            const auto& r = s.runs[i];
            out["runs"].push_back({{"recipe", r.recipe},
                                       {"loss", r.loss},
                                       {"eval_loss", r.eval_loss ? nlohmann::json(*r.eval_loss) : nlohmann::json()},
                                       {"losses", history.loss[i]},
                                       {"eval", history.eval[i]}});
            if (seeds) out["runs"].back()["name"] = meta.runs[i].name;
        }
        if (seeds) out["seeds"] = seed_json(*seeds);
        out["first_nonfinite"] = s.first_nonfinite ? nonfinite_json(*s.first_nonfinite, s.first_nonfinite_rank)
                                                   : nlohmann::json();
        std::printf("%s\n", dump_json(out).c_str());
    } else {
        print_table(s, meta);
        if (seeds) print_seed_table(*seeds);
    }
    if (!s.error.empty()) report(s.error);
    if (!trace_error.empty()) report(trace_out + " is incomplete: " + trace_error);
    return s.error.empty() && trace_error.empty() ? 0 : 1;
}

}  // namespace

void add_train(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<TrainOptions>();
    CLI::App* cmd = app.add_subcommand("train", "Train the GPT-2 or Llama-style model (several recipes in lock step with --compare)");
    CLI::Option* config = cmd->add_option("--config", opts->config, "JSON run configuration (resources/configs/*.json)");
    cmd->add_option("--preset", opts->preset,
                    "A named config of a known shape: gpt2-124m, gpt2-350m, llama-1b, gpt-8x4096, llama-8x4096, ... "
                    "(--preset help lists them)")
        ->excludes(config);
    cmd->add_option("--resume", opts->resume, "Continue from a checkpoint (its config is the base); a directory: its newest that verifies");
    cmd->add_option("--device", opts->device, "Where to train: cpu or cuda");
    cmd->add_option("--recipe", opts->recipe, "Training recipe: baseline, delayed, delayed_e4m3, current, blockwise, mxfp8 or a config's custom recipe");
    cmd->add_option("--compare", opts->compare, "Comma-separated recipes trained in lock step, e.g. baseline,delayed");
    cmd->add_option("--init-from", opts->init_from,
                    "Start every run from a Hugging Face GPT-2 or Llama checkpoint: FILE.safetensors or a folder "
                    "(model.safetensors, or shards with model.safetensors.index.json); the model takes its shape");
    cmd->add_option("--keep-high-precision", opts->keep_high_precision,
                    "Linears of the single run kept in high precision, by name pattern: 'blocks.7.*' (repeatable)");
    cmd->add_option("--steps", opts->steps, "Training steps");
    cmd->add_option("--data", opts->data, "builtin, text:PATH, tokens:PATH or a file (.bin: token file)");
    cmd->add_option("--batch", opts->batch, "Batch size B");
    cmd->add_option("--seq", opts->seq, "Sequence length T");
    cmd->add_option("--seed", opts->seed, "Seed of initialisation and batch sampling");
    cmd->add_option("--seeds", opts->seeds,
                    "Train every recipe with N seeds (--seed ... --seed + N - 1), paired across recipes, and say "
                    "whether each recipe's gap to the baseline exceeds the seeds' noise");
    cmd->add_option("--threads", opts->threads, "Worker threads (0: all)");
    cmd->add_option("--concurrent-runs", opts->concurrent_runs,
                    "on (default): on a GPU the runs of a step (recipes x seeds) go at once, a stream and thread "
                    "each, with the same results; off: one after another")
        ->check(CLI::IsMember({"on", "off"}));
    cmd->add_option("--lr", opts->lr, "Peak learning rate")
        ->check(CLI::Validator(
            [](const std::string& text) {
                double lr = 0;
                return CLI::detail::lexical_cast(text, lr) && std::isfinite(lr)
                           ? std::string()
                           : "--lr must be a finite number, got '" + text + "'";
            },
            "FINITE", "finite"));
    cmd->add_option("--eval-every", opts->eval_every, "Steps between eval losses");
    cmd->add_option("--capture-every", opts->capture_every, "Steps between GEMM operand captures");
    add_trace_options(*cmd, opts->trace);
    cmd->add_option("--checkpoint-dir", opts->checkpoint_dir, "Directory for checkpoints");
    cmd->add_option("--checkpoint-every", opts->checkpoint_every, "Steps between checkpoints");
    cmd->add_option("--log-every", opts->log_every, "Steps between progress lines when stderr is not a terminal");
    cmd->add_option("--set", opts->sets, "Override any config field: --set model.d_model=192 (repeatable)");
    cmd->add_flag("--print-config", opts->print_config, "Print the resulting config as JSON and exit");
    cmd->add_flag("--json", opts->json, "Print the summary and loss curves as JSON");
    cmd->add_flag("--quiet", opts->quiet, "No progress output");
    CLI::Option* listen = cmd->add_option("--listen", opts->listen_at,
                                          "Serve the run live: unix:PATH, tcp:PORT or HOST:PORT (no value: a local socket)")
                              ->expected(0, 1);
    cmd->add_option("--token", opts->token, "Token live clients must present (TCP without it: a random one, printed)");
    add_rank_options(*cmd, opts->ranks);
    cmd->callback([opts, listen, &exit_code] {
        opts->listen = listen->count() > 0;
        if (!opts->resume.empty() && std::filesystem::is_directory(opts->resume)) {  // its newest whole checkpoint
            try {
                const NewestCheckpoint newest = newest_checkpoint(opts->resume);
                for (const std::string& why : newest.refused)
                    std::fprintf(stderr, "fp8scope-engine: note: --resume %s: passed over %s\n", opts->resume.c_str(), why.c_str());
                opts->resume = newest.path;
            } catch (const std::exception& e) {
                report(std::string("--resume ") + e.what());
                exit_code = 1;
                return;
            }
        }
        if (opts->preset == "help") {
            print_presets();
            exit_code = 0;
            return;
        }
        if (opts->ranks.nproc_per_node < 1) {
            exit_code = run_train(*opts);
            return;
        }
        // A job that cannot start is refused here, once, not by each rank it would start.
        TrainConfig config;
        Resumed resumed;
        try {
            config = base_config(*opts, resumed);
            apply_flags(*opts, config);
        } catch (const std::exception&) {
            exit_code = run_train(*opts);  // says what is wrong, as without --nproc-per-node
            return;
        }
        if (const std::string why = config.device == "cpu" ? cpu_ranks_refused(opts->ranks.nproc_per_node) : "";
            !why.empty()) {
            report("--nproc-per-node: " + why);
            exit_code = 2;
            return;
        }
        try {
            LocalRanks ranks(opts->ranks.nproc_per_node, opts->ranks.restart_lost);
            std::vector<int> lost;
            const int mine = run_train(*opts, &lost, &ranks);
            exit_code = mine != 0 ? mine : ranks.wait(mine, lost);  // a failed rank 0 stops the others
        } catch (const std::exception& e) {
            report(e.what());
            exit_code = 1;
        }
    });
}

}  // namespace fp8scope::cli
