// `fp8scope-engine analyze FILE...`: quantizes every tensor of .npy/.safetensors files
// under every quantizer and reports the statistics (text table, JSON, HDF5, .npy dumps).
// A file that fails is reported on stderr and in the report; the others still run.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis_report.h"
#include "commands.h"
#include "dump.h"
#include "cpu/analysis.h"
#include "io/tensor_file.h"
#include "report_json.h"
#include "renamed_option.h"
#include "report_text.h"
#include "util/json_input.h"
#include "util/parallel.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

struct AnalyzeOptions {
    std::vector<std::string> files;
    std::string quantizers;
    bool json = false;
    std::string out;
    std::string dump;
    int threads = 0;
    double outlier_k = StatsOptions{}.outlier_k;
    int top_k = StatsOptions{}.top_k;
};

class AnalyzeRun {
public:
    AnalyzeRun(const AnalyzeOptions& opt, std::vector<Recipe> quantizers)
        : opt_(opt), quantizers_(std::move(quantizers)) {
        for (const Recipe& q : quantizers_) quantizer_names_.push_back(recipe_name(q));
        stats_opt_.outlier_k = opt.outlier_k;
        stats_opt_.top_k = opt.top_k;
        stats_opt_.threads = opt.threads;
    }

    int run() {
        if (!opt_.dump.empty()) {
            try {
                dumper_.emplace(opt_.dump);
            } catch (const std::exception& e) {
                fail(opt_.dump, e.what());  // the analysis still runs, without dumps
            }
        }
        for (const std::string& file : opt_.files) analyze_file(file);
        if (!opt_.out.empty()) {
            try {
                write_analysis_report(opt_.out, kEngineVersion, quantizer_names_, results_);
            } catch (const std::exception& e) {
                fail(opt_.out, e.what());
            }
        }
        if (opt_.json) {
            // File names and quoted headers may not be UTF-8: replaced, never an abort.
            std::fputs(dump_json(analysis_json(quantizer_names_, results_, errors_)).c_str(), stdout);
            std::fputc('\n', stdout);
        }
        return errors_.empty() ? 0 : 1;
    }

private:
    // One line on stderr and an entry in the report; a problem text that starts with the
    // file name already (exceptions from lower layers) is not prefixed twice.
    void fail(const std::string& file, const std::string& problem) {
        std::string shown = problem;
        if (shown.rfind(file + ": ", 0) == 0) shown = shown.substr(file.size() + 2);
        std::fprintf(stderr, "fp8scope-engine: error: %s: %s\n", file.c_str(), shown.c_str());
        errors_.push_back({file, shown});
    }

    void analyze_file(const std::string& file) {
        std::vector<LoadedTensor> loaded;
        try {
            loaded = read_tensor_file(file);
        } catch (const TensorFileError& e) {
            fail(file, e.problem());
            return;
        } catch (const std::exception& e) {
            fail(file, e.what());
            return;
        }
        for (LoadedTensor& lt : loaded) {
            analyze_tensor(file, lt);
            lt.tensor.data = {};  // free as we go: a checkpoint can be large
        }
    }

    void analyze_tensor(const std::string& file, const LoadedTensor& lt) {
        const Tensor& t = lt.tensor;
        const std::string what = "tensor '" + t.name + "'";
        if (t.shape.empty()) return fail(file, what + " is 0-d (a scalar); analyze needs rank >= 1");
        if (t.numel() == 0) return fail(file, what + " is empty (shape " + t.shape_string() + ")");

        TensorAnalysis ta{file, t.name, lt.source_dtype, t.shape, {}};
        try {
            ta.analysis = analyze(t.matrix(), quantizers_, stats_opt_);
        } catch (const std::exception& e) {
            return fail(file, what + ": " + e.what());
        }
        const TensorStats& s = ta.analysis.tensor;
        if (s.nan || s.inf)
            std::fprintf(stderr,
                         "fp8scope-engine: warning: %s: %s has %lld NaN and %lld Inf values; they are "
                         "counted and left out of the other statistics\n",
                         file.c_str(), what.c_str(), static_cast<long long>(s.nan), static_cast<long long>(s.inf));
        if (!opt_.json) {
            print_tensor_text(stdout, ta);
            std::fflush(stdout);
        }
        if (dumper_) {
            try {
                dumper_->dump(t, quantizers_, opt_.threads);
            } catch (const std::exception& e) {
                fail(file, what + ": dump failed: " + e.what());
            }
        }
        results_.push_back(std::move(ta));
    }

    const AnalyzeOptions& opt_;
    std::vector<Recipe> quantizers_;
    std::vector<std::string> quantizer_names_;
    StatsOptions stats_opt_;
    std::optional<Dumper> dumper_;
    std::vector<TensorAnalysis> results_;
    std::vector<FileError> errors_;
};

int run_analyze(const AnalyzeOptions& opt) {
    std::vector<Recipe> quantizers;
    try {
        quantizers = opt.quantizers.empty() ? default_analysis_recipes() : parse_recipe_list(opt.quantizers);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: --quantizers '%s': %s\n", opt.quantizers.c_str(), e.what());
        return 2;
    }
    if (quantizers.empty()) {
        std::fprintf(stderr, "fp8scope-engine: error: --quantizers '%s' names no quantizer\n",
                     opt.quantizers.c_str());
        return 2;
    }
    return AnalyzeRun(opt, std::move(quantizers)).run();
}

}  // namespace

void add_analyze(CLI::App& app, int& exit_code) {
    auto opt = std::make_shared<AnalyzeOptions>();
    auto* cmd = app.add_subcommand("analyze", "Quantize tensors from .npy/.safetensors files under FP8 quantizers "
                                              "and report the error of each");
    cmd->add_option("files", opt->files, ".npy or .safetensors files")->required();
    cmd->add_option("--quantizers", opt->quantizers,
                    "Comma-separated quantizer names, or 'all' (default: every current, blockwise and MXFP8 "
                    "quantizer)");
    add_renamed_option<std::string>(*cmd, "--recipes", "--quantizers", opt->quantizers);
    cmd->add_flag("--json", opt->json, "Print one JSON document on stdout instead of tables");
    cmd->add_option("--out", opt->out, "Write an HDF5 report to this file");
    cmd->add_option("--dump", opt->dump, "Write FP8 codes and scales as .npy files into this directory");
    cmd->add_option("--threads", opt->threads, "Worker threads (0: all hardware threads)")
        ->check(CLI::Range(0, kMaxThreads));
    // PositiveNumber lets NaN through (NaN <= 0 is false): finite and positive.
    cmd->add_option("--outlier-k", opt->outlier_k, "Outlier threshold in units of rms")
        ->check(CLI::Validator(
            [](const std::string& text) {
                double k = 0;
                return CLI::detail::lexical_cast(text, k) && std::isfinite(k) && k > 0
                           ? std::string()
                           : "--outlier-k must be a finite number > 0, got '" + text + "'";
            },
            "POSITIVE", "finite positive"));
    cmd->add_option("--top-k", opt->top_k, "How many of the largest |x| to report")->check(CLI::NonNegativeNumber);
    cmd->callback([opt, &exit_code] { exit_code = run_analyze(*opt); });
}

}  // namespace fp8scope::cli
