// `fp8scope-engine export TRACE --csv DIR | --chrome-trace FILE`: a trace as CSV tables
// (meta, steps, events, operands, errors, ops, ranks) and as a Chrome/Perfetto timeline of
// the op and kernel records. Reads the file only through TraceReader.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "chrome_trace_events.h"
#include "commands.h"
#include "record_fields.h"
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

std::ofstream open_out(const std::filesystem::path& p) {
    std::ofstream f(p);
    if (!f) throw std::runtime_error("cannot write " + p.string());
    return f;
}

// The name an id stands for ("" for none, e.g. run -1: the whole run).
std::string name_of(const TraceMeta& m, NameTable table, long long id) {
    auto pick = [&](const auto& v) -> std::string {
        if (id < 0 || id >= static_cast<long long>(v.size())) return {};
        if constexpr (std::is_same_v<std::decay_t<decltype(v[0])>, std::string>) return v[id];
        else return v[id].name;
    };
    switch (table) {
        case NameTable::Runs: return pick(m.runs);
        case NameTable::Linears: return pick(m.linears);
        case NameTable::Quantizers: return pick(m.quantizers);
        case NameTable::TrainingRecipes: return pick(m.training_recipes);
        case NameTable::Ops: return pick(m.ops);
    }
    return {};
}

std::string text_of(Gemm g) { return std::string(gemm_name(g)); }
std::string text_of(Operand o) { return std::string(operand_name(o)); }
std::string text_of(EventKind k) { return event_kind_name(k); }
std::string text_of(trace::OpKind k) { return trace::op_kind_name(k); }

// A CSV table's columns come from the field lists (record_fields.h): the header is their
// names in the trace (meta's config_json is the attribute `config`), a row their values. Ids are written as the quoted name they stand for, enums by
// name, numbers as the shortest text that reads back the same, strings quoted. Settings
// (the outlier k) are not figures of a row and are left out.
class Csv {
public:
    Csv(const TraceMeta& meta, const std::filesystem::path& path) : meta_(meta), out_(open_out(path)) {}

    // `columns(v, objects...)` visits a row's columns; the header is their names.
    template <class... O, class Columns>
    void header(Columns columns) {
        std::tuple<O...> defaults{};
        std::apply([&](auto&... d) { columns(*this, d...); }, defaults);
        end_line();
    }
    template <class Columns, class... O>
    void row(Columns columns, const O&... objects) {
        writing_ = true;
        columns(*this, objects...);
        end_line();
        writing_ = false;
    }

    template <class T, class... F>
    void operator()(std::string_view name, const T& v, const F&... facts) {
        if constexpr (!fields::has<fields::Setting, F...>) {
            if (!first_) line_ += ',';
            first_ = false;
            if (!writing_) line_ += fields::flat_name(name, facts...);  // the trace's own column name
            else if constexpr (fields::has<IdIn, F...>) line_ += quoted(name_of(meta_, fields::find<IdIn>(facts...)->table, v));
            else if constexpr (std::is_enum_v<T>) line_ += text_of(v);
            else if constexpr (std::is_floating_point_v<T>) line_ += num(v);
            else if constexpr (std::is_arithmetic_v<T>) line_ += std::to_string(v);
            else line_ += quoted(v);
        }
    }

private:
    void end_line() {
        out_ << line_ << '\n';
        line_.clear();
        first_ = true;
    }

    const TraceMeta& meta_;
    std::ofstream out_;
    std::string line_;
    bool writing_ = false, first_ = true;
};

// Columns of the tables that are not one record: an operand and its figures, and one
// quantizer's error figures on an operand.
template <class V, class O>
void operand_columns(V& v, const O& o) {
    fields::visit_scalars(o.key, v);
    fields::visit_scalars(o, v);                 // quantizer_in_use, scale
    fields::visit_scalars(o.stats, v);           // counts, amax, moments, dynamic range
    fields::visit_scalars(o.stats.outliers, v);  // the outlier figures (not the setting k)
}
template <class V, class O>
void error_columns(V& v, const O& o, const std::int32_t& quantizer, const int& in_use, const ErrorStats& e) {
    fields::visit_scalars(o.key, v);
    v("quantizer", quantizer, IdIn{NameTable::Quantizers});
    v("in_use", in_use);
    fields::visit_scalars(e, [&](std::string_view name, const auto& m, const auto&... facts) {
        if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(m)>>) v(name, m, facts...);
    });
}

void write_csv(const TraceReader& r, const std::string& dir) {
    namespace fs = std::filesystem;
    fs::create_directories(dir);
    const TraceMeta& m = r.meta();
    auto record = [](auto& v, const auto& rec) { fields::visit_scalars(rec, v); };

    Csv meta(m, fs::path(dir) / "meta.csv");  // the root attributes: version, machine, config, rank, grad_dtype
    meta.header<TraceMeta>(record);
    meta.row(record, m);

    Csv precision(m, fs::path(dir) / "precision.csv");  // each run's recipe per linear and GEMM
    precision.header<GemmPrecision>(record);
    for (const auto& p : m.precision) precision.row(record, p);

    Csv steps(m, fs::path(dir) / "steps.csv");
    steps.header<StepRecord>(record);
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (const auto& s : r.steps(run)) steps.row(record, s);

    Csv events(m, fs::path(dir) / "events.csv");
    events.header<EventRecord>(record);
    for (const auto& e : r.events()) events.row(record, e);

    auto operand = [](auto& v, const auto& o) { operand_columns(v, o); };
    auto error = [](auto& v, const auto&... x) { error_columns(v, x...); };
    Csv operands(m, fs::path(dir) / "operands.csv");
    operands.header<OperandRecord>(operand);
    Csv errors(m, fs::path(dir) / "errors.csv");
    errors.header<OperandRecord, std::int32_t, int, ErrorStats>(error);
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (auto step : r.capture_steps(run))
            for (const auto& o : r.operands(run, step)) {
                operands.row(operand, o);
                for (std::size_t i = 0; i < o.errors.size(); ++i)
                    errors.row(error, o, static_cast<std::int32_t>(i), int(int(i) == o.quantizer_in_use), o.errors[i]);
            }

    Csv ops(m, fs::path(dir) / "ops.csv");
    ops.header<OpRecord>(record);
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (const auto& t : r.ops(run, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()))
            ops.row(record, t);

    Csv ranks(m, fs::path(dir) / "ranks.csv");  // a data-parallel run's per-rank step times
    ranks.header<RankStepRecord>(record);
    for (const auto& k : r.rank_steps()) ranks.row(record, k);

    Csv gemm_errors(m, fs::path(dir) / "gemm_error.csv");  // each GEMM's output error at capture steps
    gemm_errors.header<GemmErrorRecord>(record);
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (const auto& g : r.gemm_errors(run)) gemm_errors.row(record, g);

    Csv gate_up(m, fs::path(dir) / "gate_up_alignment.csv");  // a SwiGLU's gate/up alignment at capture steps
    gate_up.header<GateUpAlignmentRecord>(record);
    for (int run = 0; run < (int)m.runs.size(); ++run)
        for (const auto& a : r.gate_up_alignment(run)) gate_up.row(record, a);
}

// Every run's ops and kernels, the flows between them and the loss and learning rate as
// counters (chrome_trace_events.h).
void write_chrome(const TraceReader& r, const std::string& path) {
    std::vector<std::vector<OpRecord>> ops;
    std::vector<ChromeTraceRun> runs;
    for (int run = 0; run < (int)r.meta().runs.size(); ++run)
        ops.push_back(r.ops(run, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()));
    for (int run = 0; run < (int)ops.size(); ++run) {
        const std::vector<StepRecord> steps = r.steps(run);
        runs.push_back({run, ops[run],
                        {step_counter("loss", ops[run], steps, &StepRecord::loss),
                         step_counter("learning rate", ops[run], steps, &StepRecord::lr)}});
    }
    std::ofstream f(path);
    if (!f) throw std::runtime_error("cannot write " + path);
    f << chrome_trace_json(r.meta(), runs) << '\n';
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
    cmd->add_option("--csv", opts->csv_dir, "Directory for meta/steps/events/operands/errors/ops/ranks .csv");
    cmd->add_option("--chrome-trace", opts->chrome, "Chrome trace JSON of op and kernel timings");
    cmd->callback([opts, &exit_code] { exit_code = run_export(*opts); });
}

}  // namespace fp8scope::cli
