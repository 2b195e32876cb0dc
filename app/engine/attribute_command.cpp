// `fp8scope-engine attribute`: which layers, linears or GEMM roles does a recipe's loss
// gap come from? From a checkpoint, the baseline, the recipe R and R with one group
// restored to high precision each train in lock step (engine/attribution_replicas.h); the
// groups are ranked by the share of R's gap each recovers, the smallest set that brings R
// within the target is chosen greedily and verified by a run of R with the set restored
// (engine/attribution.h), and printed as a custom recipe to paste into a config.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attribution_table.h"
#include "backends.h"
#include "commands.h"
#include "engine/attribution.h"
#include "engine/attribution_replicas.h"
#include "engine/model_impl.h"
#include "run_recording.h"
#include "train_recorder.h"
#include "util/json_input.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

// Verification runs at most: the greedy set, then up to three more groups one by one.
constexpr int kMaxVerifications = 4;

struct AttributeOptions {
    std::string from, recipe, groups = "layer", out;
    std::optional<double> target;
    long long steps = 20;
    std::optional<std::string> device;
    std::optional<long long> threads;
    bool json = false, quiet = false;
};

void report(const std::string& what) { std::fprintf(stderr, "fp8scope-engine: error: %s\n", what.c_str()); }

// A line per step on stderr: the baseline's and R's loss, and how many replicas train.
struct Progress : TrainObserver {
    Progress(std::string what, std::int64_t first, std::int64_t last, int runs, bool quiet)
        : what(std::move(what)), first(first), last(last), runs(runs), quiet(quiet) {}
    void on_step(const StepRecord& r) override {
        if (quiet) return;
        if (r.run == 0) line = "";
        if (r.run < 2) line += (r.run ? ", " : "") + r.recipe + " " + std::to_string(r.loss).substr(0, 6);
        if (r.run + 1 == runs)
            std::fprintf(stderr, "%s: step %lld/%lld: %s (%d replica%s)\n", what.c_str(),
                         static_cast<long long>(r.step - first), static_cast<long long>(last - first), line.c_str(),
                         runs, runs == 1 ? "" : "s");
    }
    std::string what, line;
    std::int64_t first, last;
    int runs;
    bool quiet;
};

std::string replica_name(const std::string& recipe, const AttributionGroup& g) { return recipe + "+hp:" + g.name; }

// A name for the printed recipe that no built-in one parses as: R's letters and digits.
std::string attributed_name(const std::string& recipe) {
    std::string name;
    for (char c : recipe) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return name + "_attributed";
}

std::string percent(double f) {
    if (!std::isfinite(f)) return "-";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * f);
    return buf;
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// Recovered fraction of the mean training loss over steps 1..k, for every k.
std::vector<double> recovered_curve(const std::vector<float>& recipe, const std::vector<float>& replica,
                                    const std::vector<float>& baseline) {
    std::vector<double> curve;
    double r = 0, x = 0, b = 0;
    for (std::size_t k = 0; k < recipe.size(); ++k) {
        r += recipe[k], x += replica[k], b += baseline[k];
        curve.push_back(recovered_fraction(r, x, b));
    }
    return curve;
}

int run_attribute(const AttributeOptions& o) {
    if (o.steps < 1) {
        report("--steps " + std::to_string(o.steps) + ": must be at least 1");
        return 2;
    }
    if (o.target && !(std::isfinite(*o.target) && *o.target >= 0)) {
        report("--target " + std::to_string(*o.target) + ": must be a finite loss gap of at least 0");
        return 2;
    }
    GroupBy by;
    try {
        by = group_by_from_name(o.groups);
    } catch (const std::exception& e) {
        report(e.what());
        return 2;
    }
    ReplicaSource src;
    try {
        src = load_replica_source(o.from, o.recipe);
    } catch (const std::exception& e) {
        report("--from: " + std::string(e.what()));
        return 1;
    }
    const RecipeBook book = src.config.recipe_book();
    const std::vector<LinearInfo> linears = model_linears(src.config.model);
    try {
        book.check(o.recipe);
        if (!book.plan(o.recipe, linears).quantized())
            throw std::invalid_argument("'" + o.recipe + "' quantizes nothing: it is already high precision");
    } catch (const std::exception& e) {
        report("--recipe: " + std::string(e.what()));
        return 2;
    }
    std::vector<std::string> sets;
    if (o.device) sets.push_back("device=" + *o.device);
    if (o.threads) sets.push_back("threads=" + std::to_string(*o.threads));
    const int steps = int(o.steps);
    const std::vector<AttributionGroup> groups = attribution_groups(linears, by);

    // The first pass: baseline, R and R with each group restored.
    std::vector<std::string> names = {"baseline", o.recipe};
    std::vector<CustomRecipe> custom;
    for (const AttributionGroup& g : groups) {
        custom.push_back(restored_recipe(book, o.recipe, {g}, replica_name(o.recipe, g)));
        names.push_back(custom.back().name);
    }
    TrainConfig config;
    std::unique_ptr<Backend> backend;
    try {
        config = replica_config(src, names, custom, steps, sets);
    } catch (const std::exception& e) {
        report(e.what());
        return 2;
    }
    const std::int64_t first = src.state.step, last = first + steps;
    if (!o.quiet)
        std::fprintf(stderr, "attribute: %s from %s (run %d, %s, step %lld): %zu %s groups, %d steps, %zu replicas\n",
                     o.recipe.c_str(), o.from.c_str(), src.run, src.state.runs[std::size_t(src.run)].recipe.c_str(),
                     static_cast<long long>(first), groups.size(), group_by_name(by), steps, names.size());
    ReplicaLosses pass;
    try {
        backend = make_backend(config.device, config.threads, 0);
        Replicas replicas(src, config, *backend);
        Progress progress("replicas", first, last, replicas.trainer().runs(), o.quiet);
        replicas.trainer().add_observer(&progress);
        std::optional<trace::RunRecording> recording;
        if (!o.out.empty()) {
            trace::RecordingOptions ro;
            ro.out = o.out;
            trace::TraceMeta meta = trace::run_trace_meta(config, replicas.trainer(), kEngineVersion, config.blockmap_every);
            trace::set_kernel_policy(meta, ro.kernels, backend->device());
            recording.emplace(ro, meta, replicas.trainer(), nullptr);
        }
        try {
            pass = replicas.train(steps);
        } catch (const std::exception& e) {
            if (recording) recording->finish(replicas.trainer().steps_done(), e.what());
            throw;
        }
        if (recording) {
            recording->finish(replicas.trainer().steps_done(), "done");
            if (const std::string error = recording->trace_error(); !error.empty())
                throw std::runtime_error(o.out + ": " + error);
        }
    } catch (const std::exception& e) {
        report(e.what());
        return 1;
    }
    const double base = pass.eval[0], loss_r = pass.eval[1], gap = loss_r - base;
    if (!(gap > 0)) {
        report(o.recipe + "'s eval loss " + std::to_string(loss_r) + " is not above the baseline's " +
               std::to_string(base) + " after " + std::to_string(steps) +
               " steps: no gap to attribute (train more --steps, or start from a checkpoint nearer the divergence)");
        return 1;
    }
    const double target = o.target ? *o.target : 0.1 * gap;
    std::vector<double> recovered;
    for (std::size_t g = 0; g < groups.size(); ++g) recovered.push_back(recovered_fraction(loss_r, pass.eval[g + 2], base));
    const std::vector<int> ranking = rank_groups(recovered);

    // Verification: R with the chosen groups restored together.
    auto restored_set = [&](const std::vector<int>& set) {
        std::vector<AttributionGroup> chosen;
        for (int g : set) chosen.push_back(groups[std::size_t(g)]);
        return restored_recipe(book, o.recipe, chosen, attributed_name(o.recipe));
    };
    Selection selection;
    try {
        selection = select_groups(recovered, ranking, gap, target, kMaxVerifications, [&](const std::vector<int>& set) {
            const CustomRecipe r = restored_set(set);
            const TrainConfig vc = replica_config(src, {r.name}, {r}, steps, sets);
            Replicas verify(src, vc, *backend);
            Progress progress("verify " + std::to_string(set.size()) + " group" + (set.size() == 1 ? "" : "s"), first,
                              last, 1, o.quiet);
            verify.trainer().add_observer(&progress);
            return double(verify.train(steps).eval[0]) - base;
        });
    } catch (const std::exception& e) {
        report(e.what());
        return 1;
    }
    const CustomRecipe attributed = restored_set(selection.chosen);
    std::vector<bool> chosen(groups.size());
    for (int g : selection.chosen) chosen[std::size_t(g)] = true;
    std::vector<int> rank_of(groups.size());
    for (std::size_t k = 0; k < ranking.size(); ++k) rank_of[std::size_t(ranking[k])] = int(k + 1);

    if (!o.out.empty()) {
        std::vector<trace::AttributionRecord> rows;
        for (std::size_t g = 0; g < groups.size(); ++g)
            rows.push_back({groups[g].name, group_by_name(by), pass.eval[g + 2], recovered[g], rank_of[g], chosen[g] ? 1 : 0});
        try {
            trace::write_attribution_table(o.out, rows);
        } catch (const std::exception& e) {
            report(e.what());
            return 1;
        }
    }

    if (o.json) {
        nlohmann::json out = {{"recipe", o.recipe},
                              {"checkpoint", o.from},
                              {"start_step", first},
                              {"steps", steps},
                              {"baseline_loss", base},
                              {"recipe_loss", loss_r},
                              {"baseline_gap", gap},
                              {"target", target},
                              {"baseline_losses", pass.train[0]},
                              {"recipe_losses", pass.train[1]}};
        out["groups"] = nlohmann::json::array();
        for (int g : ranking) {
            const auto i = std::size_t(g);
            nlohmann::json curve = nlohmann::json::array();
            for (double c : recovered_curve(pass.train[1], pass.train[i + 2], pass.train[0])) curve.push_back(number(c));
            out["groups"].push_back({{"group", groups[i].name},
                                     {"kind", group_by_name(by)},
                                     {"loss", pass.eval[i + 2]},
                                     {"recovered", number(recovered[i])},
                                     {"rank", rank_of[i]},
                                     {"losses", pass.train[i + 2]},
                                     {"curve", curve}});
        }
        out["chosen"] = nlohmann::json::array();
        for (int g : selection.chosen) out["chosen"].push_back(groups[std::size_t(g)].name);
        out["verified_gap"] = selection.verified_gap;
        out["target_met"] = selection.met;
        out["verifications"] = nlohmann::json::array();
        for (const Verification& v : selection.attempts) out["verifications"].push_back({{"groups", v.groups.size()}, {"gap", v.gap}});
        out["override"] = nlohmann::json::parse(override_snippet(attributed));
        out["override_recipe"] = attributed.name;
        std::printf("%s\n", dump_json(out).c_str());
        return 0;
    }
    std::printf("baseline eval loss %.4f, %s %.4f: gap %+.4f; target %.4f%s\n", base, o.recipe.c_str(), loss_r, gap,
                target, o.target ? "" : " (10% of the gap)");
    std::printf("\n%-5s %-24s %-7s %10s %10s\n", "rank", "group", "kind", "eval_loss", "recovered");
    for (int g : ranking) {
        const auto i = std::size_t(g);
        std::printf("%-5d %-24s %-7s %10.4f %10s%s\n", rank_of[i], groups[i].name.c_str(), group_by_name(by),
                    pass.eval[i + 2], percent(recovered[i]).c_str(), chosen[i] ? "  chosen" : "");
    }
    std::printf("\n");
    for (const Verification& v : selection.attempts)
        std::printf("verified %zu group%s restored together: gap %+.4f (%s the target)\n", v.groups.size(),
                    v.groups.size() == 1 ? "" : "s", v.gap, v.gap <= target ? "within" : "misses");
    std::printf("\nchosen: ");
    for (std::size_t k = 0; k < selection.chosen.size(); ++k)
        std::printf("%s%s", k ? ", " : "", groups[std::size_t(selection.chosen[k])].name.c_str());
    const std::string missed = " (misses the target after " + std::to_string(selection.attempts.size()) + " verifications)";
    std::printf("; verified gap %+.4f%s\n", selection.verified_gap, selection.met ? "" : missed.c_str());
    std::printf("\nadd to your config's \"recipes\", then train with --recipe %s:\n%s\n", attributed.name.c_str(),
                override_snippet(attributed, 2).c_str());
    return 0;
}

}  // namespace

void add_attribute(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<AttributeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "attribute", "Which layers, linears or GEMMs a recipe's loss gap comes from: replicas from a checkpoint, each "
                     "with one group in high precision");
    cmd->add_option("--from", opts->from, "Checkpoint the replicas start from (train --checkpoint-dir)")->required();
    cmd->add_option("--recipe", opts->recipe, "The recipe whose gap to the baseline is attributed")->required();
    cmd->add_option("--target", opts->target, "Gap to the baseline the chosen set must reach (default: 10% of R's gap)");
    cmd->add_option("--steps", opts->steps, "Steps every replica trains from the checkpoint (default 20)");
    cmd->add_option("--groups", opts->groups, "What one replica restores: layer, linear or gemm (default layer)");
    cmd->add_option("--out", opts->out, "Write the replicas as a lock-step trace, with /meta/attribution");
    cmd->add_option("--device", opts->device, "Where to train: cpu or cuda");
    cmd->add_option("--threads", opts->threads, "Worker threads (0: all)");
    cmd->add_flag("--json", opts->json, "Print the result as JSON");
    cmd->add_flag("--quiet", opts->quiet, "No progress output");
    cmd->callback([opts, &exit_code] { exit_code = run_attribute(*opts); });
}

}  // namespace fp8scope::cli
