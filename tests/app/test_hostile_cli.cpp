// The engine CLI on hostile input (issue 13): each case is the smallest input that
// showed a defect. Non-UTF-8 file names and quoted headers in --json output and a
// non-UTF-8 --checkpoint-dir in --print-config used to abort (nlohmann type_error 316);
// unbounded --threads and a NaN --outlier-k were accepted; extreme field values made
// inspect/export overflow (caught by the sanitizer build); a deep config stored in a
// checkpoint overflowed the stack; directories and huge configs ended badly.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "app/run_engine.h"
#include "capture/trace_fixture.h"
#include "engine/checkpoint.h"
#include "trace_writer.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class HostileCli : public ::testing::Test {
protected:
    fp8scope::trace::testing::TempDir dir_;
    fs::path dir() const { return dir_.path(); }
    std::string file(const std::string& name, const std::string& bytes) {
        const std::string p = dir_.file(name);
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }
    fp8scope::testing::EngineResult engine(const std::vector<std::string>& args) {
        return fp8scope::testing::run_engine(args, dir_.path());
    }
};

std::string npy_with_header(const std::string& header) {
    return std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xFF) + char(header.size() >> 8) + header;
}

}  // namespace

TEST_F(HostileCli, AnalyzeJsonWithANonUtf8FileName) {
    const std::string bad = file("t\xff\xfe.npy", "not numpy");
    auto r = engine({"analyze", bad, "--json"});
    EXPECT_EQ(r.status, 1) << r.err;
    const json doc = json::parse(r.out);  // aborted before: no output at all
    ASSERT_EQ(doc["errors"].size(), 1u);
    EXPECT_NE(doc["errors"][0]["file"].get<std::string>().find("t\xEF\xBF\xBD\xEF\xBF\xBD.npy"), std::string::npos);
}

TEST_F(HostileCli, AnalyzeJsonQuotingADamagedHeader) {
    const std::string bad = file("h.npy", npy_with_header("{'descr': '<f4', '\xff': 1}\n"));
    auto r = engine({"analyze", bad, "--json"});
    EXPECT_EQ(r.status, 1) << r.err;
    const json doc = json::parse(r.out);
    EXPECT_NE(doc["errors"][0]["error"].get<std::string>().find("unexpected key '\xEF\xBF\xBD'"), std::string::npos)
        << r.out;
}

TEST_F(HostileCli, PrintConfigWithANonUtf8CheckpointDir) {
    auto r = engine({"train", "--checkpoint-dir", "ck\xff", "--print-config"});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["checkpoint"]["dir"], "ck\xEF\xBF\xBD");
}

TEST_F(HostileCli, AnalyzeThreadsAndOutlierKAreBounded) {
    const std::string good = file("g.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n") +
                                               std::string("\0\0\x80\x3f", 4));
    EXPECT_EQ(engine({"analyze", good, "--threads", "100000"}).status, 2);
    for (const char* k : {"nan", "inf", "-1", "0"}) EXPECT_EQ(engine({"analyze", good, "--outlier-k", k}).status, 2) << k;
    EXPECT_EQ(engine({"analyze", good, "--outlier-k", "3", "--threads", "2"}).status, 0);
}

TEST_F(HostileCli, InspectAndExportExtremeFieldValues) {
    using namespace fp8scope::trace;
    const std::string path = dir_.file("extreme.h5");
    TraceMeta m = fp8scope::trace::testing::sample_meta();
    m.linears[0].layer = INT32_MAX;
    m.capture_every = INT64_MAX;
    {
        TraceWriter w(path, m);
        for (std::int64_t s : {INT64_MIN, std::int64_t(0), INT64_MAX}) w.write(fp8scope::trace::testing::sample_step(1, s));
        OpRecord op{1, INT64_MAX, 0, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX, INT64_MIN, INT64_MAX};
        w.write(op);
        op.start_ns = INT64_MAX, op.end_ns = INT64_MIN, op.device = INT32_MIN;
        w.write(op);
        w.write(EventRecord{-1, INT64_MIN, EventKind::Start, ""});
        w.close();
    }
    auto inspect = engine({"inspect", path});
    EXPECT_EQ(inspect.status, 0) << inspect.err;
    EXPECT_NE(inspect.out.find("layers 2147483648"), std::string::npos) << inspect.out;
    auto exported = engine({"export", path, "--csv", dir_.file("csv"), "--chrome-trace", dir_.file("t.json")});
    EXPECT_EQ(exported.status, 0) << exported.err;
    EXPECT_NO_THROW(json::parse(fp8scope::testing::read_bytes(dir_.file("t.json"))));
}

TEST_F(HostileCli, ResumeFromACheckpointWithADeepConfig) {
    fp8scope::TrainState s;
    s.config_json = "{\"compare\": " + std::string(200000, '[') + std::string(200000, ']') + "}";
    const std::string ck = dir_.file("deep.ckpt");
    fp8scope::save_checkpoint(ck, s);
    auto r = engine({"train", "--resume", ck});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(ck + " (config): invalid JSON: nested deeper than"), std::string::npos) << r.err.substr(0, 400);
    EXPECT_LT(r.err.size(), 400u);
}

TEST_F(HostileCli, FilesAreNamedInEveryMessage) {
    const std::string d = dir().string();
    auto data = engine({"train", "--data", "text:" + d, "--steps", "1"});
    EXPECT_EQ(data.status, 1);
    EXPECT_NE(data.err.find(d + ": cannot open text file: is a directory"), std::string::npos) << data.err;
    auto resume = engine({"train", "--resume", d});
    EXPECT_EQ(resume.status, 1);
    // A directory is searched for its newest checkpoint; this one holds none.
    EXPECT_NE(resume.err.find("error: --resume " + d + ": no checkpoint that loads (no *.ckpt file)"), std::string::npos)
        << resume.err;
    const std::string cfg = file("big.json", R"({"optimizer": {"lr": 1e400}})");
    auto config = engine({"train", "--config", cfg, "--print-config"});
    EXPECT_EQ(config.status, 1);
    EXPECT_NE(config.err.find(cfg + ": invalid JSON"), std::string::npos) << config.err;
}

TEST_F(HostileCli, AConfigNoMachineHoldsIsRefusedBeforeAllocating) {
    auto r = engine({"train", "--batch", "1048576", "--seq", "4096", "--set", "model.max_seq=4096"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("the config needs about "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("batch_size 1048576, seq_len 4096"), std::string::npos) << r.err;
}

TEST_F(HostileCli, EveryUsageErrorSaysItIsOneAndNamesTheValue) {
    const std::string good = file("g.npy", npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}\n") +
                                               std::string("\0\0\x80\x3f", 4));
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"train", "--lr", "fast"}, "'fast'"},
        {{"train", "--lr", "nan"}, "--lr must be a finite number, got 'nan'"},
        {{"train", "--flush-ms", "0"}, "--flush-ms: Value 0 not in range 1 to 60000"},
        {{"analyze", good, "--outlier-k", "nan"}, "got 'nan'"},
        {{"analyze", good, "--outlier-k", "inf"}, "got 'inf'"},
        {{"analyze", good, "--threads", "-1"}, "--threads: Value -1 not in range"},
    };
    for (const auto& [args, named] : cases) {
        const auto r = engine(args);
        EXPECT_EQ(r.status, 2) << args.back();
        EXPECT_EQ(r.err.rfind("fp8scope-engine: error: ", 0), 0u) << r.err;
        EXPECT_NE(r.err.find(named), std::string::npos) << r.err;
    }
}
