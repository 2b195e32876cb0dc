// `fp8scope-engine import DIR --out run.h5`: another tool's run as a trace. A capture
// folder of the PyTorch hook (python/fp8scope_torch) is analysed by the engine's own
// capture sink (capture/import/torch_import.h): the trace reads as if the engine had
// trained on those tensors, in every view, `inspect` and `export`.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends.h"
#include "commands.h"
#include "fp8/recipe.h"
#include "live_server.h"
#include "torch_import.h"
#include "te_log_import.h"
#include "trace_writer.h"
#include "util/host_name.h"
#include "util/parallel.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

namespace fs = std::filesystem;

struct ImportOptions {
    std::vector<std::string> inputs;  // one capture folder
    std::string out;
    std::string device = "cpu";
    int threads = 0;
    std::string recipes = "delayed";  // replays; "none": the captured run alone
    std::string quantizers;           // "": the engine's what-if set
    long long blockmap_every = -1;
    int flush_ms = 500;
    bool follow = false;  // go on importing while the run adds steps
    bool output_errors = true;
    int poll_ms = 1000;
    bool te_log = false;  // inputs are Transformer Engine debug statistics logs
    bool force = false;   // te_log: replace `out`
};

// SIGINT and SIGTERM end a followed import between polls, with a closed trace.
volatile std::sig_atomic_t g_stop = 0;

class StopFlag {
public:
    StopFlag() {
        g_stop = 0;
        struct sigaction sa {};
        sa.sa_handler = [](int) { g_stop = 1; };
        ::sigaction(SIGINT, &sa, &old_int_);
        ::sigaction(SIGTERM, &sa, &old_term_);
    }
    ~StopFlag() {
        ::sigaction(SIGINT, &old_int_, nullptr);
        ::sigaction(SIGTERM, &old_term_, nullptr);
    }
    StopFlag(const StopFlag&) = delete;
    StopFlag& operator=(const StopFlag&) = delete;
    bool raised() const { return g_stop != 0; }

private:
    struct sigaction old_int_ {}, old_term_ {};
};

int error(const std::string& what, int code = 1) {
    std::fprintf(stderr, "fp8scope-engine: error: %s\n", what.c_str());
    return code;
}

std::vector<std::string> split(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream s(list);
    for (std::string item; std::getline(s, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

// A capture folder of the PyTorch hook (or its manifest.json) into a trace.
int import_torch(const ImportOptions& o, std::string dir) {
    if (fs::path(dir).filename() == import::kManifestName) dir = fs::path(dir).parent_path().string();
    if (dir.empty()) dir = ".";
    import::TorchImportOptions io;
    io.tool_version = kEngineVersion;
    io.blockmap_every = o.blockmap_every;
    io.capture.stats.threads = o.threads;
    io.output_errors = o.output_errors;
    io.replays = o.recipes == "none" ? std::vector<std::string>{} : split(o.recipes);
    try {
        if (!o.quantizers.empty()) io.quantizers = parse_recipe_list(o.quantizers);
    } catch (const std::exception& e) {
        return error("--quantizers '" + o.quantizers + "': " + e.what(), 2);
    }
    if (!o.quantizers.empty() && io.quantizers.empty()) return error("--quantizers '" + o.quantizers + "' names no quantizer", 2);

    import::TorchCapture capture;
    try {
        capture = import::read_torch_capture(dir);
    } catch (const std::exception& e) {
        return error(e.what());
    }
    std::unique_ptr<Backend> backend;
    try {
        backend = make_backend(o.device, o.threads);
    } catch (const std::invalid_argument& e) {
        return error("--device " + o.device + ": " + e.what(), 2);
    } catch (const std::exception& e) {  // a device this build or machine does not have
        return error("--device " + o.device + ": " + e.what());
    }
    trace::TraceMeta meta;
    try {
        meta = import::torch_import_meta(capture, io, host_name() + " (import on " + backend->describe() + ")");
    } catch (const std::exception& e) {
        return error("--recipes '" + o.recipes + "': " + e.what(), 2);
    }

    double busy = 0;  // seconds
    std::int64_t captured = 0;
    try {
        trace::TraceWriterOptions wo;
        wo.flush_interval = std::chrono::milliseconds(o.flush_ms);
        trace::TraceWriter writer(o.out, meta, wo);
        std::error_code ec;
        const fs::path abs = fs::absolute(o.out, ec);
        std::string detail = std::string(live::kTraceFileDetail) + (ec ? o.out : abs.string());
        detail.resize(std::min(detail.size(), std::size_t(trace::kEventDetailChars)));
        writer.write(trace::EventRecord{-1, 0, EventKind::Start, detail});
        import::TorchImporter importer(meta, io, *backend, writer);
        auto note = [&](std::int64_t step, EventKind kind, std::string text) {
            text.resize(std::min(text.size(), std::size_t(trace::kEventDetailChars)));
            writer.write(trace::EventRecord{-1, step, kind, text});
        };
        bool stop_noted = false, error_noted = false;
        // The time spent analysing, without the waits for a followed run; then what the
        // manifest says of the capture's end, as soon as it says it.
        auto import_to = [&](std::int64_t last) {
            const auto t0 = std::chrono::steady_clock::now();
            importer.import_steps(capture, last, [&](std::int64_t) { ++captured; });
            busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (capture.stopped_step && !std::exchange(stop_noted, true))
                note(*capture.stopped_step, EventKind::CaptureInterval,
                     "capture stopped at step " + std::to_string(*capture.stopped_step) + ": " + capture.stopped_reason);
            if (!capture.error.empty() && !std::exchange(error_noted, true))
                note(importer.last_step(), EventKind::Error, "capture stopped: " + capture.error);
        };
        import_to(import::TorchImporter::settled_step(capture));
        if (o.follow) {
            // Steps as the run writes them, until it closes the capture (or a signal).
            StopFlag stop;
            while (!capture.complete && !stop.raised()) {
                std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
                capture = import::read_torch_capture(dir);
                import_to(import::TorchImporter::settled_step(capture));
                writer.flush();
            }
        }
        std::int64_t everything = import::TorchImporter::settled_step(capture);
        for (const auto& t : capture.tensors) everything = std::max(everything, t.step);
        import_to(everything);  // a killed run's last step too
        note(importer.last_step(), EventKind::End,
             capture.complete ? "done" : "the capture was not closed: the run goes on or was killed");
        writer.close();
    } catch (const std::exception& e) {
        return error(e.what());
    }
    const double s = busy;
    const double gb = double(capture.bytes) / 1e9;
    std::fprintf(stderr,
                 "fp8scope-engine: imported %lld captured steps, %zu tensors (%.3f GB) of '%s' into %s: %.2f s of "
                 "analysis (%.2f s per GB) on %s\n",
                 static_cast<long long>(captured), capture.tensors.size(), gb, capture.name.c_str(), o.out.c_str(), s,
                 gb > 0 ? s / gb : 0.0, o.device.c_str());
    return 0;
}

int run_import(const ImportOptions& o) {
    if (o.te_log) return run_te_log_import(o.inputs, o.out, o.force);
    if (o.inputs.size() != 1) return error("import takes one capture folder, got " + std::to_string(o.inputs.size()), 2);
    return import_torch(o, o.inputs.front());
}

}  // namespace

void add_import(CLI::App& app, int& exit_code) {
    auto opt = std::make_shared<ImportOptions>();
    auto* cmd = app.add_subcommand("import", "Turn another tool's run into a trace: a capture folder of the PyTorch "
                                             "hook (python/fp8scope_torch), or Transformer Engine's debug logs "
                                             "(--te-log)");
    cmd->add_option("inputs", opt->inputs, "Capture folder (or its manifest.json); with --te-log, statistics logs or "
                                           "folders holding them")
        ->required();
    cmd->add_flag("--te-log", opt->te_log,
                  "The inputs are nvdlfw_inspect statistics logs of Transformer Engine's precision debug tools");
    cmd->add_flag("--force", opt->force, "With --te-log: replace OUT when it exists");
    cmd->add_option("--out", opt->out, "Trace file to write")->required();
    cmd->add_option("--device", opt->device, "Where the operands are analysed: cpu or cuda")->capture_default_str();
    cmd->add_option("--threads", opt->threads, "CPU threads (0: all hardware threads)")->check(CLI::Range(0, kMaxThreads));
    cmd->add_option("--recipes", opt->recipes,
                    "Training recipes to replay the captured operands under, one run each (comma-separated; "
                    "'none': only the captured run)")
        ->capture_default_str();
    cmd->add_option("--quantizers", opt->quantizers,
                    "Quantizers every operand is analysed under (default: the engine's what-if set; 'all')");
    cmd->add_option("--blockmap-every", opt->blockmap_every,
                    "Block maps every N steps (default: 10 x the capture interval; 0: never)")
        ->check(CLI::Range(-1LL, 1LL << 40));
    cmd->add_option("--flush-ms", opt->flush_ms, "Flush the trace every N ms")->check(CLI::Range(1, 60000));
    cmd->add_flag("!--no-output-errors", opt->output_errors,
                  "Skip each GEMM's output error (the GEMMs run again, with and without the casts)");
    cmd->add_flag("--follow", opt->follow,
                  "Go on importing the steps the run adds until it closes the capture (Ctrl-C ends it)");
    cmd->add_option("--poll-ms", opt->poll_ms, "With --follow: read the manifest every N ms")
        ->check(CLI::Range(10, 600000));
    cmd->callback([opt, &exit_code] { exit_code = run_import(*opt); });
}

}  // namespace fp8scope::cli
