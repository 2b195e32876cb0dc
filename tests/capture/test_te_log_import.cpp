// `import --te-log` end to end: two ranks' statistics logs written by hand in the
// documented format (rank 0 with TE >= 2.7's recipe-prefixed names, rank 1 with TE
// 2.4-2.6's bare ones), imported with run_te_log_import, read back with the trace reader:
// every logged value is in /meta/te_log with its file and line, and every one the trace
// has a figure for equals the log's in that figure, in the GEMMs TE's copies feed.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <optional>

#include "finding.h"
#include "te_log_import.h"
#include "te_log_trace.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::te_log {
namespace {

using trace::testing::TempDir;

struct Entry {
    std::string layer, tensor, stat;
    long long iteration;
    std::string value;  // as printed
    long long line = 0;
};

std::string text_of(std::vector<Entry>& entries) {
    std::string text;
    long long line = 0;
    for (Entry& e : entries) {
        char it[32];
        std::snprintf(it, sizeof it, "%06lld", e.iteration);
        text += "2025-06-10 12:00:01,123 - INFO - " + e.layer + "_" + e.tensor + "_" + e.stat + " \t\t\t\t iteration=" + it +
                " \t\t\t\t value=" + e.value + "\n";
        e.line = ++line;
    }
    return text;
}

void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

const char* kQkv = "model.decoder.layers.0.self_attention.linear_qkv";
const char* kFc2 = "model.decoder.layers.1.mlp.linear_fc2";

std::vector<Entry> rank0_entries() {
    std::vector<Entry> e;
    for (long long it : {0LL, 5LL, 10LL}) {
        const std::string k = std::to_string(it);
        e.push_back({kQkv, "activation", "cur_amax", it, "4.31" + k});
        e.push_back({kQkv, "activation", "mean", it, "0.0001"});
        e.push_back({kQkv, "activation", "std", it, "0.9998"});
        e.push_back({kQkv, "activation", "dynamic_range", it, "17.250" + k});
        e.push_back({kQkv, "activation", "l1_norm", it, "130799.6953"});
        e.push_back({kQkv, "activation", "max_blockwise_dynamic_range_block_size_32_dims_1_max_over_orientations", it, "9.5000"});
        e.push_back({kQkv, "activation", "fp8_current_scaling_underflows%", it, "0.012" + k});
        e.push_back({kQkv, "activation", "fp8_current_scaling_scale_inv_min", it, "0.0096"});
        e.push_back({kQkv, "activation", "fp8_current_scaling_scale_inv_max", it, "0.0096"});
        e.push_back({kQkv, "activation", "mxfp8_underflows%", it, "0.0200"});
        e.push_back({kQkv, "activation", "mxfp8_underflows%_columnwise", it, "0.0300"});
        e.push_back({kQkv, "activation", "mxfp8_mse", it, "0.0011"});
        e.push_back({kQkv, "weight", "fp8_block_scaling_scale_inv_max_columnwise", it, "0.0004"});
        e.push_back({kQkv, "weight", "fp8_block_scaling_scale_inv_min", it, "0.0001"});
        e.push_back({kQkv, "gradient", "cur_amax", it, "0.000" + std::to_string(it + 1)});
        e.push_back({kQkv, "gradient", "fp8_delayed_scaling_overflows%", it, "0.5000"});
        e.push_back({kQkv, "gradient", "nvfp4_mse", it, "inf"});
        e.push_back({kQkv, "output", "max", it, "12.0000"});
        e.push_back({kFc2, "weight", "cur_amax", it, "0.1250"});
        e.push_back({kFc2, "dgrad", "l2_norm", it, "3.5000"});
    }
    return e;
}

std::vector<Entry> rank1_entries() {
    std::vector<Entry> e;
    for (long long it : {0LL, 5LL}) {
        e.push_back({kFc2, "activation", "min", it, "-7.2500"});
        e.push_back({kFc2, "activation", "max", it, "6.5000"});
        e.push_back({kFc2, "activation", "underflows%", it, "1.7500"});
        e.push_back({kFc2, "gradient", "underflows%", it, "nan"});
    }
    e.push_back({kFc2, "activation", "max", 5, "6.7500"});  // logged again: the later line wins
    return e;
}

struct Fixture {
    TempDir dir;
    std::vector<Entry> rank0 = rank0_entries(), rank1 = rank1_entries();
    std::string out = dir / "run.h5";
    std::string log0 = dir / "log/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-0.log";
    std::string log1 = dir / "log/nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-1.log";
    Fixture() {
        write(log1, text_of(rank1));
        write(log0, text_of(rank0));
        write(dir / "log/nvdlfw_inspect_logs/nvdlfw_inspect_globalrank-0.log",
              "2025-06-10 12:00:00,001 - INFO - Reading config from ./config.yaml.\n");
    }
};

double number(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

// Where the trace keeps a statistic, written apart from the importer from TE's names:
// operand and the GEMMs fed by the copy it describes (rowwise: fprop x, fprop w, dgrad dy;
// columnwise: wgrad x, dgrad w, wgrad dy; per-tensor recipes' one scale: both).
struct Place {
    Operand operand;
    std::vector<Gemm> gemms;
};
std::optional<Place> place_of(const std::string& tensor, const std::string& stat) {
    const bool columnwise = stat.size() > 11 && stat.substr(stat.size() - 11) == "_columnwise";
    const bool per_tensor = stat.rfind("fp8_current_scaling_", 0) == 0 || stat.rfind("fp8_delayed_scaling_", 0) == 0;
    const bool quantized = stat.find("underflows%") != std::string::npos || stat.find("overflows%") != std::string::npos ||
                           stat.find("scale_inv") != std::string::npos || stat.find("mse") != std::string::npos;
    if (tensor == "activation")
        return Place{Operand::X, !quantized || per_tensor ? std::vector{Gemm::Fprop, Gemm::Wgrad}
                                 : columnwise           ? std::vector{Gemm::Wgrad}
                                                        : std::vector{Gemm::Fprop}};
    if (tensor == "weight")
        return Place{Operand::W, !quantized || per_tensor ? std::vector{Gemm::Fprop, Gemm::Dgrad}
                                 : columnwise           ? std::vector{Gemm::Dgrad}
                                                        : std::vector{Gemm::Fprop}};
    if (tensor == "gradient")
        return Place{Operand::DY, !quantized || per_tensor ? std::vector{Gemm::Dgrad, Gemm::Wgrad}
                                  : columnwise           ? std::vector{Gemm::Wgrad}
                                                         : std::vector{Gemm::Dgrad}};
    return std::nullopt;
}

// The figure of a record that holds `stat` (NaN-free comparisons: a NaN equals a NaN).
std::optional<double> figure(const trace::TraceMeta& m, const trace::OperandRecord& o, const std::string& stat) {
    if (stat == "cur_amax") return o.stats.amax;
    if (stat == "mean") return o.stats.mean;
    if (stat == "std") return o.stats.stddev;
    if (stat == "dynamic_range") return o.stats.dynamic_range;
    std::string s = stat;
    if (s.size() > 11 && s.substr(s.size() - 11) == "_columnwise") s.resize(s.size() - 11);
    std::string q = "recipe_in_use";
    for (const char* r : {"fp8_current_scaling", "fp8_delayed_scaling", "fp8_block_scaling", "mxfp8", "nvfp4"})
        if (s.rfind(std::string(r) + "_", 0) == 0) q = r, s = s.substr(std::string(r).size() + 1);
    const auto id = std::find(m.quantizers.begin(), m.quantizers.end(), q) - m.quantizers.begin();
    if (std::size_t(id) >= m.quantizers.size()) return std::nullopt;
    const ErrorStats& e = o.errors.at(std::size_t(id));
    if (s == "underflows%") return e.underflow_pct;
    if (s == "overflows%") return e.overflow_pct;
    if (s == "scale_inv_min") return e.scale_inv_min;
    if (s == "scale_inv_max") return e.scale_inv_max;
    if (s == "mse") return e.mse;
    return std::nullopt;  // min, max, l1_norm, l2_norm, blockwise dynamic range: /meta/te_log only
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

TEST(TeLogImport, EveryLoggedValueReadsBackAsLogged) {
    Fixture f;
    ASSERT_EQ(cli::run_te_log_import({f.dir / "log"}, f.out, false), 0);
    trace::TraceReader reader(f.out);
    const trace::TraceMeta& m = reader.meta();
    ASSERT_EQ(m.runs.size(), 2u);
    EXPECT_EQ(m.runs[0].name, "rank 0");
    EXPECT_EQ(m.runs[1].name, "rank 1");
    EXPECT_EQ(trace::baseline_of(m), -1);
    ASSERT_EQ(m.linears.size(), 2u);
    EXPECT_EQ(m.linears[0].name, kQkv);
    EXPECT_EQ(m.linears[0].layer, 0);
    EXPECT_EQ(m.linears[1].name, kFc2);
    EXPECT_EQ(m.linears[1].layer, 1);
    EXPECT_EQ(m.quantizers, (std::vector<std::string>{"recipe_in_use", "fp8_current_scaling", "mxfp8",
                                                      "fp8_block_scaling", "fp8_delayed_scaling", "nvfp4"}));
    EXPECT_EQ(m.capture_every, 5);

    const RawTable raw = read_raw_table(f.out);
    ASSERT_EQ(raw.rows.size(), f.rank0.size() + f.rank1.size());
    ASSERT_EQ(raw.files.size(), 2u);
    EXPECT_EQ(raw.files[0], f.log0);
    EXPECT_EQ(raw.files[1], f.log1);

    std::size_t checked_figures = 0;
    std::map<std::tuple<int, long long, std::string, std::string, std::string>, long long> last_line;
    for (int run : {0, 1})
        for (const Entry& e : run == 0 ? f.rank0 : f.rank1) last_line[{run, e.iteration, e.layer, e.tensor, e.stat}] = e.line;
    std::size_t row = 0;
    for (int run : {0, 1})
        for (const Entry& e : run == 0 ? f.rank0 : f.rank1) {
            const RawRow& r = raw.rows.at(row++);
            const std::string where = std::to_string(run) + ":" + std::to_string(e.line);
            EXPECT_EQ(r.run, run) << where;
            EXPECT_EQ(r.file, run) << where;
            EXPECT_EQ(r.line, e.line) << where;
            EXPECT_EQ(r.step, e.iteration) << where;
            EXPECT_EQ(m.linears.at(std::size_t(r.linear)).name, e.layer) << where;
            EXPECT_EQ(std::string(tensor_name(static_cast<Tensor>(r.tensor))), e.tensor) << where;
            EXPECT_EQ(raw.stats.at(std::size_t(r.stat)), e.stat) << where;
            EXPECT_TRUE(same(r.value, number(e.value))) << where;

            if (last_line[{run, e.iteration, e.layer, e.tensor, e.stat}] != e.line) continue;  // overwritten
            const auto place = place_of(e.tensor, e.stat);
            if (!place) continue;
            const int linear = r.linear;
            for (Gemm g : place->gemms) {
                const auto o = reader.operand({run, e.iteration, linear, g, place->operand});
                ASSERT_TRUE(o) << where << " " << gemm_name(g);
                if (const auto v = figure(m, *o, e.stat)) {
                    EXPECT_TRUE(same(*v, number(e.value))) << where << " " << e.stat << " " << gemm_name(g) << ": " << *v;
                    ++checked_figures;
                }
            }
        }
    EXPECT_EQ(checked_figures, 3u * 26 + 2u * 2);  // rank 0: 26 figures an iteration; rank 1: 2

    // The GEMM a copy does not feed has no figure: mxfp8's rowwise mse is fprop x's alone,
    // the bare (in-use) underflows of rank 1 fprop x's alone.
    const auto wgrad_x = reader.operand({0, 5, 0, Gemm::Wgrad, Operand::X});
    ASSERT_TRUE(wgrad_x);
    EXPECT_TRUE(std::isnan(wgrad_x->errors[2].mse));
    EXPECT_EQ(wgrad_x->errors[2].underflow_pct, 0.03);
    EXPECT_EQ(wgrad_x->quantizer_in_use, 0);
    const auto wgrad_x1 = reader.operand({1, 5, 1, Gemm::Wgrad, Operand::X});
    ASSERT_TRUE(wgrad_x1);
    EXPECT_TRUE(std::isnan(wgrad_x1->errors[0].underflow_pct));

    // amax without cur_amax: max(|min|, |max|), the later max of iteration 5.
    EXPECT_EQ(reader.operand({1, 0, 1, Gemm::Fprop, Operand::X})->stats.amax, 7.25);
    EXPECT_EQ(reader.operand({1, 5, 1, Gemm::Wgrad, Operand::X})->stats.amax, 7.25);
    EXPECT_TRUE(std::isnan(reader.operand({1, 5, 1, Gemm::Fprop, Operand::X})->stats.stddev));

    // The scaling table's amax (float32) at every logged step, in both GEMMs' slots.
    const auto scaling = reader.scaling(0, 0, 10);
    ASSERT_EQ(scaling.size(), 3u);
    for (const auto& s : scaling) {
        const float amax = float(number("4.31" + std::to_string(s.step)));
        EXPECT_EQ(s.amax[trace::operand_slot(0, Gemm::Fprop, Operand::X)], amax);
        EXPECT_EQ(s.amax[trace::operand_slot(0, Gemm::Wgrad, Operand::X)], amax);
        EXPECT_EQ(s.amax[trace::operand_slot(1, Gemm::Dgrad, Operand::W)], 0.125f);
        EXPECT_TRUE(std::isnan(s.amax[trace::operand_slot(1, Gemm::Fprop, Operand::X)]));
        EXPECT_TRUE(std::isnan(s.scale[trace::operand_slot(0, Gemm::Fprop, Operand::X)]));
    }
    EXPECT_EQ(reader.capture_steps(0), (std::vector<std::int64_t>{0, 5, 10}));
    EXPECT_EQ(reader.capture_steps(1), (std::vector<std::int64_t>{0, 5}));
    EXPECT_EQ(reader.steps(1).size(), 2u);
    EXPECT_TRUE(std::isnan(reader.steps(1)[0].loss));
}

TEST(TeLogImport, RefusesWhatItCannotImportAndWritesNothing) {
    Fixture f;
    // A malformed middle line: exit 1, no trace.
    write(f.log1, text_of(f.rank1) + "garbage\n" + text_of(f.rank1));
    EXPECT_EQ(cli::run_te_log_import({f.dir / "log"}, f.out, false), 1);
    EXPECT_FALSE(std::filesystem::exists(f.out));
    write(f.log1, text_of(f.rank1));

    EXPECT_EQ(cli::run_te_log_import({f.dir / "missing"}, f.out, false), 1);
    EXPECT_EQ(cli::run_te_log_import({}, f.out, false), 2);
    EXPECT_EQ(cli::run_te_log_import({f.log0}, "", false), 2);

    // An existing output is replaced only with force.
    ASSERT_EQ(cli::run_te_log_import({f.log0}, f.out, false), 0);
    EXPECT_EQ(cli::run_te_log_import({f.log0, f.log1}, f.out, false), 1);
    EXPECT_EQ(trace::TraceReader(f.out).meta().runs.size(), 1u);
    ASSERT_EQ(cli::run_te_log_import({f.log0, f.log1}, f.out, true), 0);
    EXPECT_EQ(trace::TraceReader(f.out).meta().runs.size(), 2u);
    for (const auto& p : std::filesystem::directory_iterator(f.dir.path()))
        EXPECT_EQ(p.path().string().find(".tmp."), std::string::npos) << p.path();
}

TEST(TeLogImport, AnIncompleteLastLineIsLeftOut) {
    Fixture f;
    write(f.log1, text_of(f.rank1) + "2025-06-10 12:00:01,123 - INFO - " + kFc2 + "_activation_max \t\t\t\t itera");
    ASSERT_EQ(cli::run_te_log_import({f.log1}, f.out, false), 0);
    EXPECT_EQ(read_raw_table(f.out).rows.size(), f.rank1.size());
}

TEST(TeLogImport, DiagnoseFindsOnlyWhatTheLogSays) {
    // No loss and no amax logged are no non-finite loss or amax; an Inf amax is one.
    Fixture f;
    ASSERT_EQ(cli::run_te_log_import({f.dir / "log"}, f.out, false), 0);
    for (const auto& finding : diagnose::diagnose(trace::TraceReader(f.out)))
        EXPECT_NE(finding.kind, "non_finite") << finding.summary;

    std::vector<Entry> inf = {{kFc2, "activation", "cur_amax", 1, "2.0000"}, {kFc2, "activation", "cur_amax", 2, "inf"}};
    write(f.log1, text_of(inf));
    ASSERT_EQ(cli::run_te_log_import({f.log1}, f.out, true), 0);
    std::vector<diagnose::Finding> non_finite;
    for (auto& finding : diagnose::diagnose(trace::TraceReader(f.out)))
        if (finding.kind == "non_finite") non_finite.push_back(finding);
    ASSERT_EQ(non_finite.size(), 2u);  // fprop x and wgrad x: one tensor, both GEMMs' operand
    for (const auto& finding : non_finite) {
        EXPECT_EQ(finding.step, 2);
        EXPECT_EQ(finding.operand, Operand::X);
    }
}

TEST(TeLogImport, OtherTracesHaveNoRawTable) {
    TempDir dir;
    const std::string path = dir / "t.h5";
    { trace::TraceWriter(path, trace::testing::sample_meta()).close(); }
    EXPECT_TRUE(read_raw_table(path).rows.empty());
}

}  // namespace
}  // namespace fp8scope::te_log
