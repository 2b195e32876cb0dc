// `fp8scope-engine export TRACE --csv DIR | --chrome-trace FILE`: a trace as CSV tables
// (steps, events, operands, errors, ops) and as a Chrome/Perfetto timeline of the op and
// kernel records. Reads the file only through TraceReader.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "trace_reader.h"

namespace fp8scope::cli {
namespace {

using namespace trace;

struct ExportOptions {
    std::string trace, csv_dir, chrome;
};

// Numbers as the shortest text that reads back the same; NaN as an empty cell.
std::string num(double v) {
    if (std::isnan(v)) return "";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

const char* gemm_str(Gemm g) { return g == Gemm::Fprop ? "fprop" : g == Gemm::Dgrad ? "dgrad" : "wgrad"; }
const char* operand_str(Operand o) { return o == Operand::X ? "x" : o == Operand::W ? "w" : "dy"; }

std::ofstream open_out(const std::filesystem::path& p) {
    std::ofstream f(p);
    if (!f) throw std::runtime_error("cannot write " + p.string());
    return f;
}

void write_csv(const TraceReader& r, const std::string& dir) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    const TraceMeta& m = r.meta();
    auto recipe_of = [&](int id) { return id >= 0 && id < (int)m.recipes.size() ? m.recipes[id] : std::string(); };

    auto steps = open_out(fs::path(dir) / "steps.csv");
    steps << "run,step,loss,eval_loss,lr,grad_norm,step_time_s,tokens_per_s,recipe\n";
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (const auto& s : r.steps(run))
            steps << quoted(m.runs[run].name) << ',' << s.step << ',' << num(s.loss) << ',' << num(s.eval_loss) << ','
                  << num(s.lr) << ',' << num(s.grad_norm) << ',' << num(s.step_time_s) << ',' << num(s.tokens_per_s)
                  << ',' << quoted(s.recipe >= 0 ? m.training_recipes.at(s.recipe) : "") << '\n';

    auto events = open_out(fs::path(dir) / "events.csv");
    events << "run,step,kind,detail\n";
    for (const auto& e : r.events())
        events << quoted(e.run >= 0 ? m.runs.at(e.run).name : "") << ',' << e.step << ',' << event_kind_name(e.kind)
               << ',' << quoted(e.detail) << '\n';

    auto ops = open_out(fs::path(dir) / "operands.csv");
    ops << "run,step,linear,gemm,operand,recipe_in_use,scale,numel,finite,nan,inf,zero,amax,min_nonzero_abs,mean,"
           "rms,stddev,dynamic_range,kurtosis,frac_beyond_k_rms\n";
    auto errs = open_out(fs::path(dir) / "errors.csv");
    errs << "run,step,linear,gemm,operand,recipe,in_use,amax,mse,sqnr_db,rel_l2,max_abs_err,cosine,underflow_pct,"
            "overflow_pct,scale_inv_min,scale_inv_max,nonfinite_out\n";
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (auto step : r.capture_steps(run))
            for (const auto& o : r.operands(run, step)) {
                std::string key = quoted(m.runs[run].name) + ',' + std::to_string(step) + ',' +
                                  quoted(m.linears.at(o.key.linear).name) + ',' + gemm_str(o.key.gemm) + ',' +
                                  operand_str(o.key.operand);
                const TensorStats& s = o.stats;
                ops << key << ',' << quoted(recipe_of(o.recipe_in_use)) << ',' << num(o.scale) << ',' << s.numel << ','
                    << s.finite << ',' << s.nan << ',' << s.inf << ',' << s.zero << ',' << num(s.amax) << ','
                    << num(s.min_nonzero_abs) << ',' << num(s.mean) << ',' << num(s.rms) << ',' << num(s.stddev) << ','
                    << num(s.dynamic_range) << ',' << num(s.outliers.kurtosis) << ','
                    << num(s.outliers.frac_beyond_k_rms) << '\n';
                for (std::size_t i = 0; i < o.errors.size(); ++i) {
                    const ErrorStats& e = o.errors[i];
                    errs << key << ',' << quoted(m.recipes[i]) << ',' << (int(i) == o.recipe_in_use) << ','
                         << num(e.amax) << ',' << num(e.mse) << ',' << num(e.sqnr_db) << ',' << num(e.rel_l2) << ','
                         << num(e.max_abs_err) << ',' << num(e.cosine) << ',' << num(e.underflow_pct) << ','
                         << num(e.overflow_pct) << ',' << num(e.scale_inv_min) << ',' << num(e.scale_inv_max) << ','
                         << e.nonfinite_out << '\n';
                }
            }

    auto times = open_out(fs::path(dir) / "ops.csv");
    times << "run,step,op,linear,layer,device,stream,start_ns,end_ns\n";
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (const auto& t : r.ops(run, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()))
            times << quoted(m.runs[run].name) << ',' << t.step << ',' << quoted(m.ops.at(t.op)) << ','
                  << quoted(t.linear >= 0 && t.linear < (int)m.linears.size() ? m.linears[t.linear].name : "") << ','
                  << t.layer << ',' << t.device << ',' << t.stream << ',' << t.start_ns << ',' << t.end_ns << '\n';
}

// Chrome trace event format ("X" complete events, microseconds): one process per run and
// device, one thread per stream.
void write_chrome(const TraceReader& r, const std::string& path) {
    const TraceMeta& m = r.meta();
    nlohmann::json events = nlohmann::json::array();
    std::int64_t origin = std::numeric_limits<std::int64_t>::max();
    std::vector<std::vector<OpRecord>> per_run;
    for (int run = 0; run < (int)m.runs.size(); ++run) {
        per_run.push_back(r.ops(run, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
        for (const auto& t : per_run.back()) origin = std::min(origin, t.start_ns);
    }
    for (int run = 0; run < (int)m.runs.size(); ++run) {
        int pid_base = run * 1000;
        events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid_base},
                          {"args", {{"name", m.runs[run].name + " (CPU)"}}}});
        for (const auto& t : per_run[run]) {
            int pid = pid_base + (t.device >= 0 ? t.device + 1 : 0);
            nlohmann::json args = {{"step", t.step}};
            if (t.linear >= 0 && t.linear < (int)m.linears.size()) args["linear"] = m.linears[t.linear].name;
            if (t.layer >= 0) args["layer"] = t.layer;
            events.push_back({{"ph", "X"}, {"name", m.ops.at(t.op)}, {"cat", t.device >= 0 ? "kernel" : "op"},
                              {"ts", double(t.start_ns - origin) / 1000.0},
                              {"dur", double(t.end_ns - t.start_ns) / 1000.0}, {"pid", pid}, {"tid", t.stream},
                              {"args", args}});
        }
    }
    std::ofstream f(path);
    if (!f) throw std::runtime_error("cannot write " + path);
    f << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ns"}}.dump() << '\n';
}

int run_export(const ExportOptions& o) {
    if (o.csv_dir.empty() && o.chrome.empty()) {
        std::fprintf(stderr, "fp8scope-engine: error: export needs --csv DIR and/or --chrome-trace FILE\n");
        return 2;
    }
    try {
        TraceReader r(o.trace);
        if (!o.csv_dir.empty()) write_csv(r, o.csv_dir);
        if (!o.chrome.empty()) write_chrome(r, o.chrome);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

void add_export(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<ExportOptions>();
    CLI::App* cmd = app.add_subcommand("export", "Export a trace as CSV tables or a Chrome/Perfetto timeline");
    cmd->add_option("trace", opts->trace, "HDF5 trace written by train --out")->required();
    cmd->add_option("--csv", opts->csv_dir, "Directory for steps/events/operands/errors/ops .csv");
    cmd->add_option("--chrome-trace", opts->chrome, "Chrome trace JSON of op and kernel timings");
    cmd->callback([opts, &exit_code] { exit_code = run_export(*opts); });
}

}  // namespace fp8scope::cli
