// Import of a PyTorch capture folder, on folders made here: the manifest reader's checks
// (each error names the file and field), and the import's records against the analysis of
// the same tensors, a delayed-scaling history worked out by hand, and the reported steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "capture/vector_sink.h"
#include "cpu/analysis.h"
#include "cpu/cpu_backend.h"
#include "fp8/format.h"
#include "fp8/scaling.h"
#include "fp8/training_recipe.h"
#include "torch_capture.h"
#include "torch_import.h"

namespace fp8scope::import {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

CpuBackend& cpu() {
    static CpuBackend backend(2);
    return backend;
}

struct Matrix {
    std::int64_t rows, cols;
    std::vector<float> v;
    Matrix transposed() const {
        Matrix t{cols, rows, std::vector<float>(v.size())};
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c) t.v[std::size_t(c * rows + r)] = v[std::size_t(r * cols + c)];
        return t;
    }
    float amax() const {
        float a = 0;
        for (float x : v) a = std::max(a, std::fabs(x));
        return a;
    }
};

Matrix random_matrix(std::int64_t rows, std::int64_t cols, float scale, unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> n(0.0f, scale);
    Matrix m{rows, cols, {}};
    for (std::int64_t i = 0; i < rows * cols; ++i) m.v.push_back(n(gen));
    return m;
}

// A .safetensors file of F32 tensors, laid out as the format says.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, const Matrix*>>& tensors) {
    json header = json::object();
    std::string data;
    for (const auto& [name, m] : tensors) {
        const std::size_t begin = data.size();
        data.append(reinterpret_cast<const char*>(m->v.data()), m->v.size() * sizeof(float));
        header[name] = {{"dtype", "F32"}, {"shape", {m->rows, m->cols}}, {"data_offsets", {begin, data.size()}}};
    }
    const std::string text = header.dump();
    std::string len(8, '\0');
    for (int i = 0; i < 8; ++i) len[std::size_t(i)] = char((text.size() >> (8 * i)) & 0xFF);
    std::ofstream(path, std::ios::binary) << len << text << data;
}

// One linear (8 in, 4 out) at capture steps 1 and 3 of three reported steps: what the
// hook writes for it.
class CaptureFolder : public ::testing::Test {
protected:
    void SetUp() override {
        dir = (fs::temp_directory_path() / ("fp8scope_import_" + std::to_string(::getpid()) + "_" +
                                            ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                  .string();
        fs::remove_all(dir);
        fs::create_directories(dir);
        for (int s : {1, 3}) {
            const unsigned seed = unsigned(s) * 10;
            x[s] = random_matrix(5, 8, 2.0f * float(s), seed);
            w[s] = random_matrix(4, 8, 0.1f, seed + 1);
            dy[s] = random_matrix(5, 4, 1e-3f / float(s), seed + 2);
        }
        manifest = {{"format", "fp8scope-torch-capture"}, {"version", 1}, {"name", "my run"}, {"every", 2},
                    {"created", "2026-01-01T00:00:00Z"}, {"bytes", 0}, {"stopped", nullptr}, {"complete", true},
                    {"linears", {{{"name", "model.layers.7.mlp.fc1"}, {"layer", 7}, {"in_features", 8}, {"out_features", 4}}}},
                    {"steps", {{{"step", 1}, {"loss", 2.5}, {"step_ms", 10.0}, {"captured", true}},
                               {{"step", 2}, {"loss", 2.25}, {"step_ms", 11.0}, {"captured", false}},
                               {{"step", 3}, {"loss", nullptr}, {"step_ms", 12.0}, {"captured", true}}}},
                    {"tensors", json::array()}};
        for (int s : {1, 3}) {
            const std::string file = "step_00000" + std::to_string(s) + "/model.layers.7.mlp.fc1.safetensors";
            fs::create_directories(fs::path(dir) / fs::path(file).parent_path());
            write_safetensors(dir + "/" + file, {{"fc1.x", &x[s]}, {"fc1.w", &w[s]}, {"fc1.dy", &dy[s]}});
            for (const auto& [op, m] : {std::pair<std::string, Matrix*>{"x", &x[s]}, {"w", &w[s]}, {"dy", &dy[s]}}) {
                const json gemms = op == "x" ? json{"fprop", "wgrad"} : op == "w" ? json{"fprop", "dgrad"} : json{"dgrad", "wgrad"};
                manifest["tensors"].push_back({{"step", s}, {"linear", "model.layers.7.mlp.fc1"}, {"operand", op},
                                               {"gemms", gemms}, {"name", "fc1." + op}, {"file", file},
                                               {"dtype", "F32"}, {"shape", {m->rows, m->cols}}});
            }
        }
        save();
    }
    void TearDown() override { fs::remove_all(dir); }

    void save() const { std::ofstream(dir + "/manifest.json") << manifest.dump(1); }
    std::string manifest_path() const { return (fs::path(dir) / "manifest.json").string(); }

    // Runs `f` and expects a CaptureError whose message holds every piece of `parts`.
    static void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
        try {
            f();
            ADD_FAILURE() << "no error; expected one with '" << parts.front() << "'";
        } catch (const CaptureError& e) {
            for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n lacks: " << p;
        }
    }
    void expect_bad_manifest(const std::vector<std::string>& parts) {
        save();
        expect_error([&] { read_torch_capture(dir); }, parts);
    }

    struct Imported {
        trace::TraceMeta meta;
        trace::VectorSink sink;
    };
    std::unique_ptr<Imported> import_all(std::vector<std::string> replays = {"delayed"}) {
        auto out = std::make_unique<Imported>();
        TorchImportOptions o;
        o.replays = std::move(replays);
        o.capture.stats.threads = 2;
        const TorchCapture c = read_torch_capture(dir);
        out->meta = torch_import_meta(c, o, "test");
        import_torch_capture(c, o, out->meta, cpu(), out->sink);
        return out;
    }

    std::string dir;
    json manifest;
    std::map<int, Matrix> x, w, dy;
};

void expect_same(double a, double b, const std::string& what) {
    if (std::isnan(a) && std::isnan(b)) return;
    EXPECT_EQ(a, b) << what;
}

TEST_F(CaptureFolder, ReadsTheManifest) {
    const TorchCapture c = read_torch_capture(dir);
    EXPECT_EQ(c.name, "my run");
    EXPECT_EQ(c.every, 2);
    EXPECT_EQ(c.world_size, 1);  // not a data-parallel job's
    ASSERT_EQ(c.linears.size(), 1u);
    EXPECT_EQ(c.linears[0].name, "model.layers.7.mlp.fc1");
    EXPECT_EQ(c.linears[0].layer, 7);
    ASSERT_EQ(c.steps.size(), 3u);
    EXPECT_EQ(c.steps[1].loss, 2.25);
    EXPECT_TRUE(std::isnan(c.steps[2].loss));
    ASSERT_EQ(c.tensors.size(), 6u);
    EXPECT_EQ(c.tensors[5].operand, Operand::DY);
    EXPECT_EQ(c.tensors[5].rows, 5);
    EXPECT_EQ(c.tensors[5].cols, 4);
    EXPECT_EQ(c.tensors[5].field, "tensors[5]");
    const Tensor t = load_captured(c, c.tensors[1]);
    EXPECT_EQ(t.data, w[1].v);
}

// Every operand record of the captured run holds the figures `analyze` computes for the
// tensor in the orientation its GEMM reads: fprop x, w; dgrad dy, w^T; wgrad dy^T, x^T.
// As in the engine's capture, the second GEMM of an operand keeps the first one's
// figures for the quantizers whose cast of the transpose is the transposed cast
// (per-tensor, square blocks), except at block-map steps, where it is analysed whole.
TEST_F(CaptureFolder, FiguresAreTheAnalysisOfEachGemmsOrientation) {
    const auto imp = import_all();
    std::vector<Recipe> quantizers;
    for (const auto& q : imp->meta.quantizers) quantizers.push_back(parse_recipe(q));
    std::vector<trace::OperandRecord> run0;
    for (const auto& r : imp->sink.all<trace::OperandRecord>())
        if (r.key.run == 0) run0.push_back(r);
    ASSERT_EQ(run0.size(), 12u);
    const std::vector<std::pair<Gemm, Operand>> order = {{Gemm::Fprop, Operand::X}, {Gemm::Fprop, Operand::W},
                                                         {Gemm::Dgrad, Operand::DY}, {Gemm::Dgrad, Operand::W},
                                                         {Gemm::Wgrad, Operand::DY}, {Gemm::Wgrad, Operand::X}};
    for (std::size_t i = 0; i < run0.size(); ++i) {
        const trace::OperandRecord& r = run0[i];
        const int step = i < 6 ? 1 : 3;
        EXPECT_EQ(r.key.step, step);
        EXPECT_EQ(r.key.linear, 0);
        EXPECT_EQ(r.key.gemm, order[i % 6].first);
        EXPECT_EQ(r.key.operand, order[i % 6].second);
        EXPECT_EQ(r.quantizer_in_use, -1);  // the captured run quantizes nothing
        const Matrix& stored = r.key.operand == Operand::X ? x[step] : r.key.operand == Operand::W ? w[step] : dy[step];
        const Matrix m = i % 6 < 3 ? stored : stored.transposed();
        const Analysis a = analyze(MatrixView{m.v.data(), m.rows, m.cols}, quantizers);
        const Analysis first = analyze(MatrixView{stored.v.data(), stored.rows, stored.cols}, quantizers);
        const bool map_step = step == 1;
        EXPECT_EQ(r.stats.numel, m.rows * m.cols);
        expect_same(r.stats.amax, a.tensor.amax, "amax");
        expect_same(r.stats.rms, a.tensor.rms, "rms");
        expect_same(r.stats.outliers.kurtosis, a.tensor.outliers.kurtosis, "kurtosis");
        ASSERT_EQ(r.errors.size(), quantizers.size());
        for (std::size_t q = 0; q < quantizers.size(); ++q) {
            const std::string what = "record " + std::to_string(i) + " " + imp->meta.quantizers[q];
            const ErrorStats& want = !map_step && columnwise_is_transpose(quantizers[q]) ? first.errors[q] : a.errors[q];
            expect_same(r.errors[q].sqnr_db, want.sqnr_db, what + " sqnr_db");
            expect_same(r.errors[q].mse, want.mse, what + " mse");
            expect_same(r.errors[q].cosine, want.cosine, what + " cosine");
            expect_same(r.errors[q].max_abs_err, want.max_abs_err, what + " max_abs_err");
            expect_same(r.errors[q].underflow_pct, want.underflow_pct, what + " underflow_pct");
            expect_same(r.errors[q].overflow_pct, want.overflow_pct, what + " overflow_pct");
            expect_same(r.errors[q].scale_inv_min, want.scale_inv_min, what + " scale_inv_min");
            expect_same(r.errors[q].scale_inv_max, want.scale_inv_max, what + " scale_inv_max");
        }
    }
    // Block maps at step 1 (every 10 x 2 steps from step 1), none at step 3.
    for (const auto& b : imp->sink.all<trace::BlockMapRecord>()) EXPECT_EQ(b.key.step, 1);
    EXPECT_FALSE(imp->sink.all<trace::BlockMapRecord>().empty());
}

// The delayed replay: step 1 casts with s = 1 and an empty history; step 3 with the amax
// step 1 pushed (x and w E4M3, dy E5M2: the HYBRID recipe), s = fp8_max / amax in float32.
TEST_F(CaptureFolder, DelayedReplayCarriesTheHistoryOfCapturedSteps) {
    const auto imp = import_all();
    ASSERT_EQ(imp->meta.runs.size(), 2u);
    EXPECT_EQ(imp->meta.runs[0].name, "my run");
    EXPECT_EQ(imp->meta.runs[0].recipe, "baseline");
    EXPECT_EQ(imp->meta.runs[1].name, "delayed (replay)");
    const TrainingRecipe delayed = training_recipe("delayed");
    for (const auto& r : imp->sink.all<trace::OperandRecord>()) {
        if (r.key.run != 1) continue;
        const Operand o = r.key.operand;
        ASSERT_GE(r.quantizer_in_use, 0);
        EXPECT_EQ(imp->meta.quantizers[std::size_t(r.quantizer_in_use)], recipe_name(*delayed.operand(o)));
        const Matrix& first = o == Operand::X ? x[1] : o == Operand::W ? w[1] : dy[1];
        if (r.key.step == 1) {
            EXPECT_TRUE(r.amax_history.empty());
            EXPECT_EQ(r.scale, 1.0);
        } else {
            ASSERT_EQ(r.amax_history.size(), 1u);
            EXPECT_EQ(r.amax_history[0], first.amax());
            const float fp8_max = o == Operand::DY ? 57344.0f : 448.0f;
            EXPECT_EQ(r.scale, double(fp8_max / first.amax()));
            // The in-use row's scale_inv is that scale's inverse.
            EXPECT_EQ(r.errors[std::size_t(r.quantizer_in_use)].scale_inv_max, double(1.0f / float(r.scale)));
        }
    }
}

// Each GEMM's output error: the captured run's GEMMs quantize nothing (their own
// reference: +Inf dB); the delayed replay's at step 3, worked out here in double from the
// scalar FP8 encoder: x and w E4M3, dy E5M2, each with the scale of step 1's amax.
TEST_F(CaptureFolder, GemmOutputErrorsOfTheReplayedCasts) {
    const auto imp = import_all();
    const auto errors = imp->sink.all<trace::GemmErrorRecord>();
    ASSERT_EQ(errors.size(), 12u);  // 2 steps x 2 runs x 3 GEMMs
    auto quantized = [](const Matrix& m, float s, Format f) {
        Matrix q = m;
        for (float& v : q.v) v = decode(f, encode(f, v * s)) * (1.0f / s);
        return q;
    };
    // out (rows, cols) = sum over k of a(r, k) b(c, k), in double.
    auto product = [](const Matrix& a, const Matrix& b) {
        std::vector<double> out(std::size_t(a.rows * b.rows));
        for (std::int64_t r = 0; r < a.rows; ++r)
            for (std::int64_t c = 0; c < b.rows; ++c) {
                double sum = 0;
                for (std::int64_t k = 0; k < a.cols; ++k)
                    sum += double(a.v[std::size_t(r * a.cols + k)]) * double(b.v[std::size_t(c * b.cols + k)]);
                out[std::size_t(r * b.rows + c)] = sum;
            }
        return out;
    };
    auto sqnr = [](const std::vector<double>& out, const std::vector<double>& ref) {
        double signal = 0, noise = 0;
        for (std::size_t i = 0; i < ref.size(); ++i) signal += ref[i] * ref[i], noise += (out[i] - ref[i]) * (out[i] - ref[i]);
        return 10 * std::log10(signal / noise);
    };
    const float sx = 448.0f / x[1].amax(), sw = 448.0f / w[1].amax(), sdy = 57344.0f / dy[1].amax();
    const Matrix xq = quantized(x[3], sx, Format::E4M3), wq = quantized(w[3], sw, Format::E4M3),
                 dyq = quantized(dy[3], sdy, Format::E5M2);
    std::map<Gemm, double> want = {
        {Gemm::Fprop, sqnr(product(xq, wq), product(x[3], w[3]))},
        {Gemm::Dgrad, sqnr(product(dyq, wq.transposed()), product(dy[3], w[3].transposed()))},
        {Gemm::Wgrad, sqnr(product(dyq.transposed(), xq.transposed()), product(dy[3].transposed(), x[3].transposed()))}};
    int replayed = 0;
    for (const auto& e : errors) {
        EXPECT_EQ(e.linear, 0);
        if (e.run == 0) {
            EXPECT_EQ(e.sqnr_db, INFINITY);
            EXPECT_EQ(e.rel_err, 0.0);
        } else if (e.step == 3) {
            EXPECT_NEAR(e.sqnr_db, want.at(e.gemm), 1e-3) << gemm_name(e.gemm);
            EXPECT_GT(e.rel_err, 0.0);
            ++replayed;
        }
    }
    EXPECT_EQ(replayed, 3);
}

TEST_F(CaptureFolder, StepRecordsCarryTheReportedLossOnTheCapturedRun) {
    const auto imp = import_all();
    const auto steps = imp->sink.all<trace::StepRecord>();
    ASSERT_EQ(steps.size(), 6u);  // 3 steps x 2 runs
    EXPECT_EQ(steps[0].run, 0);
    EXPECT_EQ(steps[0].loss, 2.5);
    EXPECT_EQ(steps[0].step_ms, 10.0);
    EXPECT_TRUE(std::isnan(steps[1].loss));  // the replay has no loss of its own
    EXPECT_EQ(steps[2].step, 2);
    EXPECT_EQ(steps[2].loss, 2.25);
    EXPECT_TRUE(std::isnan(steps[4].loss));  // step 3 reported none
    EXPECT_EQ(steps[4].step_ms, 12.0);
    // A scaling record per run and captured step.
    EXPECT_EQ(imp->sink.all<trace::ScalingRecord>().size(), 4u);
}

TEST_F(CaptureFolder, ARanksCaptureIsThatRanksTrace) {
    manifest["rank"] = 3;
    manifest["world_size"] = 4;
    save();
    const auto imp = import_all();
    EXPECT_EQ(imp->meta.rank, 3);
    EXPECT_EQ(imp->meta.world_size, 4);
}

TEST_F(CaptureFolder, NoReplaysIsTheCapturedRunAlone) {
    const auto imp = import_all({});
    EXPECT_EQ(imp->meta.runs.size(), 1u);
    EXPECT_EQ(imp->meta.baseline_run, 0);
    EXPECT_THROW(import_all({"baseline"}), std::invalid_argument);
    EXPECT_THROW(import_all({"no_such_recipe"}), std::invalid_argument);
}

TEST_F(CaptureFolder, BadManifestsNameTheField) {
    const json good = manifest;
    const std::string file = manifest_path();
    std::ofstream(file) << "{\"format\": ";
    expect_error([&] { read_torch_capture(dir); }, {file, "invalid JSON"});

    manifest["format"] = "something else";
    expect_bad_manifest({file, "'format'", "something else"});
    manifest = good;
    manifest["version"] = 2;
    expect_bad_manifest({file, "'version'", "newer"});
    manifest = good;
    manifest["world_size"] = 2;
    manifest["rank"] = 2;
    expect_bad_manifest({file, "'rank'", "below world_size 2"});
    manifest = good;
    manifest.erase("every");
    expect_bad_manifest({file, "'every'", "missing"});
    manifest = good;
    manifest["linears"][0]["in_features"] = "8";
    expect_bad_manifest({file, "'linears[0].in_features'", "integer"});
    manifest = good;
    manifest["steps"][1]["loss"] = "low";
    expect_bad_manifest({file, "'steps[1].loss'", "number"});
    manifest = good;
    manifest["tensors"][2]["operand"] = "z";
    expect_bad_manifest({file, "'tensors[2].operand'", "x, w or dy"});
    manifest = good;
    manifest["tensors"][0]["gemms"] = {"fprop", "dgrad"};
    expect_bad_manifest({file, "'tensors[0].gemms'", "[\"fprop\",\"wgrad\"]"});
    manifest = good;
    manifest["tensors"][3]["linear"] = "model.layers.8.mlp.fc1";
    expect_bad_manifest({file, "'tensors[3].linear'", "model.layers.8.mlp.fc1"});
    manifest = good;
    manifest["tensors"][1]["shape"] = {4, 9};  // w of an 8-in, 4-out linear
    expect_bad_manifest({file, "'tensors[1].shape'", "[4,9]", "[4, 8]"});
    manifest = good;
    manifest["tensors"][2]["shape"] = {6, 4};  // dy with more rows than x
    expect_bad_manifest({file, "'tensors[2].shape'", "6 rows", "tensors[0]"});
    manifest = good;
    manifest["tensors"][0]["file"] = "../elsewhere.safetensors";
    expect_bad_manifest({file, "'tensors[0].file'", "inside the folder"});
    manifest = good;
    manifest["tensors"][0]["dtype"] = "I32";
    expect_bad_manifest({file, "'tensors[0].dtype'", "I32"});
}

TEST_F(CaptureFolder, MissingFileIsNamed) {
    const std::string lost = dir + "/step_000003/model.layers.7.mlp.fc1.safetensors";
    fs::remove(lost);
    expect_error([&] { import_all(); }, {lost, "tensors[3].file"});
}

TEST_F(CaptureFolder, FileThatDisagreesWithTheManifestIsNamed) {
    const std::string file = dir + "/step_000001/model.layers.7.mlp.fc1.safetensors";
    const Matrix wide = random_matrix(5, 9, 1.0f, 7);
    write_safetensors(file, {{"fc1.x", &wide}, {"fc1.w", &w[1]}, {"fc1.dy", &dy[1]}});
    expect_error([&] { import_all(); }, {file, "'fc1.x'", "[5,9]", "[5,8]", "tensors[0]"});
    write_safetensors(file, {{"fc1.w", &w[1]}, {"fc1.dy", &dy[1]}});
    expect_error([&] { import_all(); }, {file, "no tensor 'fc1.x'"});
}

}  // namespace
}  // namespace fp8scope::import
