// `fp8scope-engine export` and `inspect` on a trace the engine wrote, checked against the
// losses the same run printed as JSON: the CSV tables, the Chrome/Perfetto timeline, the
// summary, and a clear error for a file that is not a trace.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "app/run_engine.h"
#include "trace_writer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kConfigs = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";

using Result = fp8scope::testing::EngineResult;

fs::path scratch() { return fp8scope::testing::scratch_dir("fp8scope_trace_cli"); }

Result engine(const std::string& args) { return fp8scope::testing::run_engine(args, scratch()); }

std::vector<std::string> split_csv_line(const std::string& line) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char ch : line) {
        if (ch == '"') quoted = !quoted;
        else if (ch == ',' && !quoted) cells.push_back(std::exchange(cell, {}));
        else cell += ch;
    }
    cells.push_back(cell);
    return cells;
}

// The records of a CSV file as cells: quotes removed ("" in a quoted cell is one "), and a
// quoted cell may span lines (a trace's config JSON does).
std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::vector<std::string>> rows(1);
    std::string cell;
    bool quoted = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char ch = text[i];
        if (quoted) {
            if (ch != '"') cell += ch;
            else if (i + 1 < text.size() && text[i + 1] == '"') cell += text[++i];
            else quoted = false;
        } else if (ch == '"') {
            quoted = true;
        } else if (ch == ',') {
            rows.back().push_back(std::exchange(cell, {}));
        } else if (ch == '\n') {
            rows.back().push_back(std::exchange(cell, {}));
            rows.emplace_back();
        } else {
            cell += ch;
        }
    }
    if (rows.back().empty()) rows.pop_back();
    return rows;
}

// One traced lock-step run shared by the tests below.
class TraceCli : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        trace_ = new fs::path(scratch() / "run.h5");
        Result r = engine("train --config " + (kConfigs / "tiny.json").string() +
                          " --threads 2 --compare baseline,delayed --capture-every 10 --json --out " +
                          trace_->string());
        ASSERT_EQ(r.status, 0) << r.err;
        printed_ = new json(json::parse(r.out));
    }
    static void TearDownTestSuite() {
        delete trace_;
        delete printed_;
    }
    static fs::path* trace_;
    static json* printed_;
};
fs::path* TraceCli::trace_ = nullptr;
json* TraceCli::printed_ = nullptr;

}  // namespace

TEST_F(TraceCli, CsvStepsHoldEveryLossTheRunPrinted) {
    const fs::path dir = scratch() / "csv";
    Result r = engine("export " + trace_->string() + " --csv " + dir.string());
    ASSERT_EQ(r.status, 0) << r.err;
    for (const char* table : {"meta.csv", "steps.csv", "events.csv", "operands.csv", "errors.csv", "ops.csv"})
        EXPECT_TRUE(fs::exists(dir / table)) << table;

    std::ifstream in(dir / "steps.csv");
    std::string line;
    std::getline(in, line);
    const auto header = split_csv_line(line);
    ASSERT_GE(header.size(), 3u);
    ASSERT_EQ(header[0], "run");
    ASSERT_EQ(header[1], "step");
    ASSERT_EQ(header[2], "loss");
    const json& runs = (*printed_)["runs"];
    std::size_t rows = 0;
    while (std::getline(in, line)) {
        const auto cells = split_csv_line(line);
        const std::string run = cells[0];
        const int step = std::stoi(cells[1]);
        const int index = run == "baseline" ? 0 : run == "delayed" ? 1 : -1;
        ASSERT_GE(index, 0) << line;
        const json& losses = runs[index]["losses"];
        ASSERT_GE(step, 1);
        ASSERT_LE(step, int(losses.size()));
        // Both hold the float32 loss; compare at float precision.
        EXPECT_EQ(float(std::stod(cells[2])), float(losses[step - 1].get<double>())) << line;
        ++rows;
    }
    EXPECT_EQ(rows, runs[0]["losses"].size() + runs[1]["losses"].size());
}

TEST_F(TraceCli, ChromeTimelineHasOneCompleteEventPerOp) {
    const fs::path out = scratch() / "timeline.json";
    Result r = engine("export " + trace_->string() + " --chrome-trace " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    std::ifstream in(out);
    const json doc = json::parse(in);
    std::size_t complete = 0;
    std::set<std::string> processes;
    for (const auto& e : doc["traceEvents"]) {
        if (e["ph"] == "X") {
            ++complete;
            EXPECT_GE(e["dur"].get<double>(), 0.0);
            EXPECT_GE(e["args"]["step"].get<int>(), 1);
        } else if (e["ph"] == "M" && e["name"] == "process_name") {
            processes.insert(e["args"]["name"].get<std::string>());
        }
    }
    EXPECT_GT(complete, 0u);
    EXPECT_EQ(processes.size(), 2u);  // one per run
}

TEST_F(TraceCli, ChromeTimelineCountsEveryLossTheRunPrinted) {
    const fs::path out = scratch() / "counters.json";
    Result r = engine("export " + trace_->string() + " --chrome-trace " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    std::ifstream in(out);
    const json doc = json::parse(in);
    // Per run (pid 1000 x run) its loss counter, in time order: the printed losses in step order.
    std::map<std::int64_t, std::vector<std::pair<double, double>>> loss;
    for (const auto& e : doc["traceEvents"])
        if (e["ph"] == "C" && e["name"] == "loss")
            loss[e["pid"].get<std::int64_t>()].emplace_back(e["ts"].get<double>(), e["args"]["value"].get<double>());
    const json& runs = (*printed_)["runs"];
    ASSERT_EQ(loss.size(), runs.size());
    for (std::size_t run = 0; run < runs.size(); ++run) {
        auto& points = loss[std::int64_t(run) * 1000];
        std::sort(points.begin(), points.end());
        const json& printed = runs[run]["losses"];
        ASSERT_EQ(points.size(), printed.size());
        for (std::size_t i = 0; i < points.size(); ++i)
            EXPECT_EQ(float(points[i].second), float(printed[i].get<double>())) << "run " << run << " step " << i + 1;
    }
}

TEST_F(TraceCli, InspectSummarisesRunsAndWorstTensors) {
    Result r = engine("inspect " + trace_->string());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string steps = std::to_string((*printed_)["runs"][0]["losses"].size());
    EXPECT_NE(r.out.find("run 0 baseline"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("run 1 delayed"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("steps " + steps), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("worst by sqnr"), std::string::npos) << r.out;
    // Delayed scaling casts a tensor alike for both its GEMMs: each is listed once, for both.
    std::istringstream lines(r.out);
    int listed = 0;
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("  delayed ", 0) == 0) {
            ++listed;
            EXPECT_TRUE(line.find("fprop+dgrad w") != std::string::npos || line.find("fprop+wgrad x") != std::string::npos ||
                        line.find("dgrad+wgrad dy") != std::string::npos)
                << line;
        }
    EXPECT_GT(listed, 0) << r.out;
}

// gemm_error.csv: one row per run, capture step, linear and GEMM; the baseline's GEMMs
// have no quantized operand (exact: SQNR inf), delayed scaling's have an error whose two
// figures agree (rel_err = 10^(-sqnr_db / 20), both from the same sums); inspect names
// each run's most damaged GEMM output at its last capture step, as the CSV has it.
TEST_F(TraceCli, GemmErrorCsvAndInspectNameTheWorstGemmOutput) {
    const fs::path dir = scratch() / "csv_gemm";
    Result r = engine("export " + trace_->string() + " --csv " + dir.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto rows = read_csv(dir / "gemm_error.csv");
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows[0], (std::vector<std::string>{"run", "step", "linear", "gemm", "sqnr_db", "rel_err", "max_abs_err"}));
    const std::size_t steps = (*printed_)["runs"][0]["losses"].size();
    const std::size_t captures = (steps + 9) / 10, linears = 4;  // tiny.json: 1 layer, capture every 10
    ASSERT_EQ(rows.size(), 1 + 2 * captures * linears * 3);
    std::int64_t last = -1;
    std::vector<std::string> worst;
    for (std::size_t i = 1; i < rows.size(); ++i) {
        const auto& c = rows[i];
        ASSERT_EQ(c.size(), 7u);
        if (c[0] == "baseline") {
            EXPECT_EQ(c[4], "inf") << i;
            EXPECT_EQ(c[5], "0") << i;
            continue;
        }
        ASSERT_EQ(c[0], "delayed");
        const double sqnr = std::stod(c[4]), rel = std::stod(c[5]);
        EXPECT_GT(sqnr, 10.0) << i;  // FP8: a few per cent, neither none nor all
        EXPECT_LT(sqnr, 60.0) << i;
        EXPECT_NEAR(rel / std::pow(10.0, -sqnr / 20.0), 1.0, 1e-4) << i;
        EXPECT_GT(std::stod(c[6]), 0.0) << i;
        const std::int64_t step = std::stoll(c[1]);
        if (step > last) last = step, worst.clear();
        if (step == last && (worst.empty() || sqnr < std::stod(worst[4]))) worst = c;
    }
    ASSERT_FALSE(worst.empty());
    r = engine("inspect " + trace_->string());
    ASSERT_EQ(r.status, 0) << r.err;
    char line[256];
    std::snprintf(line, sizeof line, "worst GEMM output at step %lld: %s %s, SQNR %.2f dB", (long long)last,
                  worst[2].c_str(), worst[3].c_str(), std::stod(worst[4]));
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
    EXPECT_NE(r.out.find("GEMM outputs at step " + std::to_string(last) + ": exact"), std::string::npos) << r.out;
}

TEST(TraceCliErrors, AFileThatIsNotATraceIsNamedAndFails) {
    const fs::path bogus = scratch() / "notes.h5";
    std::ofstream(bogus) << "not an HDF5 file\n";
    for (const std::string& cmd : {"inspect " + bogus.string(), "export " + bogus.string() + " --csv " +
                                                                 (scratch() / "never").string()}) {
        Result r = engine(cmd);
        EXPECT_EQ(r.status, 1) << cmd;
        EXPECT_NE(r.err.find(bogus.string()), std::string::npos) << r.err;
    }
}

// meta.csv: the root attributes by their names in the trace, one row. A single process
// names no gradient sum type; the baseline is the run that quantizes nothing.
TEST_F(TraceCli, MetaCsvHoldsTheRootAttributes) {
    const fs::path dir = scratch() / "meta_csv";
    Result r = engine("export " + trace_->string() + " --csv " + dir.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto rows = read_csv(dir / "meta.csv");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0], (std::vector<std::string>{"format_version", "tool_version", "created", "machine", "config",
                                                 "capture_every", "blockmap_every", "rank", "world_size",
                                                 "grad_dtype", "baseline_run", "kernel_timings", "kernel_window"}));
    ASSERT_EQ(rows[1].size(), rows[0].size());
    EXPECT_EQ(rows[1][0], std::to_string(fp8scope::trace::kFormatVersion));
    EXPECT_EQ(rows[1][5], "10");   // --capture-every 10
    EXPECT_EQ(rows[1][6], "100");  // block maps: 10 x the capture interval
    EXPECT_EQ(rows[1][7], "0");
    EXPECT_EQ(rows[1][8], "1");
    EXPECT_EQ(rows[1][9], "");
    EXPECT_EQ(rows[1][10], "0");  // --compare baseline,delayed
    EXPECT_EQ(rows[1][11], "off");  // the CPU backend has no device kernels
    EXPECT_EQ(rows[1][12], "0");
    const json config = json::parse(rows[1][4]);  // tiny.json's model
    EXPECT_EQ(config["model"]["d_model"], 32);
    EXPECT_EQ(config["model"]["n_layer"], 1);
}

// A data-parallel trace: export writes every rank's step times to ranks.csv and the sums'
// type to meta.csv, inspect says which rank of how many wrote it and the sums' type.
TEST(TraceCliRanks, RanksCsvHoldsEveryRanksStepTimes) {
    const fs::path trace = scratch() / "job.h5", dir = scratch() / "job_csv";
    {
        fp8scope::trace::TraceMeta m;
        m.runs = {{"delayed", "delayed"}};
        m.world_size = 2;
        m.grad_dtype = "bf16";
        fp8scope::trace::TraceWriter w(trace.string(), m);
        w.write(fp8scope::trace::RankStepRecord{1, 0, 100.5, 30.25, 131.75, 3.5, 8000000, 0.00125});
        w.write(fp8scope::trace::RankStepRecord{1, 1, 130.5, 0.5, 131.75, 3.25, 8000000, 0.00125, 31.5, 0.25, 0});
        w.close();
    }
    Result r = engine("export " + trace.string() + " --csv " + dir.string());
    ASSERT_EQ(r.status, 0) << r.err;
    std::ifstream in(dir / "ranks.csv");
    std::string header, first, second;
    std::getline(in, header);
    std::getline(in, first);
    std::getline(in, second);
    EXPECT_EQ(header,
              "step,rank,compute_ms,comm_ms,step_ms,loss,grad_bytes,grad_error,grad_snr_db,grad_underflow_pct,"
              "grad_overflow_pct");
    EXPECT_EQ(first, "1,0,100.5,30.25,131.75,3.5,8000000,0.00125,,,");  // not FP8 sums: empty cells
    EXPECT_EQ(second, "1,1,130.5,0.5,131.75,3.25,8000000,0.00125,31.5,0.25,0");
    const auto meta = read_csv(dir / "meta.csv");
    ASSERT_EQ(meta.size(), 2u);
    ASSERT_EQ(meta[1].size(), 13u);
    EXPECT_EQ(meta[0][0], "format_version");
    EXPECT_EQ(meta[1][0], std::to_string(fp8scope::trace::kFormatVersion));
    // rank, world_size, grad_dtype, baseline_run, kernel_timings, kernel_window (the last
    // three not recorded by this writer's caller)
    EXPECT_EQ(std::vector<std::string>(meta[1].begin() + 7, meta[1].end()),
              (std::vector<std::string>{"0", "2", "bf16", "-2", "", "0"}));
    r = engine("inspect " + trace.string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("data-parallel: written by rank 0 of 2, gradient sums in bf16, rank step records 2"),
              std::string::npos)
        << r.out;
}
