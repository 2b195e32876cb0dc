// Runs the real `fp8scope-engine analyze` on .npy and .safetensors files written byte by
// byte here, and checks its JSON, text, .npy dumps and HDF5 report against figures this
// file computes on its own (its own E4M3 decoder and rounding, its own statistics).
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
static_assert(std::endian::native == std::endian::little, "the byte writers below assume little endian");

// ---- running the binary -------------------------------------------------------------

struct Result {
    int code = -1;
    std::string out, err;
};

std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

class AnalyzeCli : public ::testing::Test {
protected:
    void SetUp() override {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        std::string name = info->name();
        std::replace(name.begin(), name.end(), '/', '_');
        dir_ = fs::temp_directory_path() / ("fp8scope_cli_" + std::to_string(::getpid()) + "_" + name);
        fs::remove_all(dir_);
        fs::create_directories(dir_);
    }
    void TearDown() override {
        if (!HasFailure()) fs::remove_all(dir_);
    }

    Result analyze(const std::vector<std::string>& args) {
        std::string cmd = quote(FP8SCOPE_ENGINE) + " analyze";
        for (const auto& a : args) {
            cmd += ' ';
            cmd += quote(a);
        }
        const fs::path out = dir_.parent_path() / (dir_.filename().string() + ".stdout");
        const fs::path err = dir_.parent_path() / (dir_.filename().string() + ".stderr");
        cmd += " >" + quote(out.string()) + " 2>" + quote(err.string());
        const int status = std::system(cmd.c_str());
        Result r;
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        r.out = slurp(out);
        r.err = slurp(err);
        fs::remove(out);
        fs::remove(err);
        return r;
    }

    json analyze_json(const std::vector<std::string>& args, int expect_code = 0) {
        std::vector<std::string> a = args;
        a.push_back("--json");
        Result r = analyze(a);
        EXPECT_EQ(r.code, expect_code) << r.err;
        try {
            return json::parse(r.out);  // throws if anything but the document is on stdout
        } catch (const std::exception& e) {
            ADD_FAILURE() << "stdout is not one JSON document: " << e.what() << "\n" << r.out;
            return json::object();
        }
    }

    std::string file(const std::string& name, const std::string& bytes) {
        const fs::path p = dir_ / name;
        std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return p.string();
    }

    fs::path dir_;
};

// ---- hand-written file bytes ---------------------------------------------------------

template <class T>
std::string raw(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// NumPy format 1.0: magic, version, header length (u16 LE), dict padded to 64 bytes.
std::string npy(const std::string& descr, const std::string& shape, const std::string& data) {
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + dict.size() + 1) % 64) dict += ' ';
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(dict.size() & 0xFF);
    out += static_cast<char>(dict.size() >> 8);
    return out + dict + data;
}

std::string npy_f32(const std::string& shape, const std::vector<float>& v) { return npy("<f4", shape, raw(v)); }

std::string u64le(std::uint64_t n) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
    return s;
}

std::string safetensors(const std::string& header, const std::string& data) {
    return u64le(header.size()) + header + data;
}

// ---- the test's own E4M3 ------------------------------------------------------------

float e4m3_decode(std::uint8_t code) {
    const int e = (code >> 3) & 15, m = code & 7;
    const float sign = (code & 0x80) ? -1.0f : 1.0f;
    if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
    if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);
    return sign * std::ldexp(1.0f + m / 8.0f, e - 7);
}

// Saturating round-to-nearest-even by search over all finite magnitudes.
std::uint8_t e4m3_encode(float x) {
    const float a = std::fabs(x);
    std::uint8_t best = 0;
    for (int c = 1; c <= 0x7E; ++c) {
        const double d = std::fabs(double(e4m3_decode(c)) - a), db = std::fabs(double(e4m3_decode(best)) - a);
        if (d < db || (d == db && (c & 1) == 0)) best = static_cast<std::uint8_t>(c);
    }
    if (a > 448.0f) best = 0x7E;
    return static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

struct Expected {
    double mse, sqnr_db, rel_l2, max_abs_err, cosine, underflow_pct;
};

// FP8.md's error definitions, in float64, from x and its dequantized x'.
Expected error_figures(const std::vector<float>& x, const std::vector<float>& xq) {
    double se = 0, sx = 0, sq = 0, dot = 0, maxe = 0;
    int nonzero = 0, under = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double d = double(xq[i]) - x[i];
        se += d * d;
        sx += double(x[i]) * x[i];
        sq += double(xq[i]) * xq[i];
        dot += double(x[i]) * xq[i];
        maxe = std::max(maxe, std::fabs(d));
        if (x[i] != 0) {
            ++nonzero;
            under += xq[i] == 0;
        }
    }
    return {se / x.size(), 10 * std::log10(sx / se), std::sqrt(se / sx), maxe,
            dot / (std::sqrt(sx) * std::sqrt(sq)), 100.0 * under / nonzero};
}

// Per-tensor E4M3 with scale s, cast from the float32 product x * s.
std::vector<float> per_tensor_e4m3(const std::vector<float>& x, float s) {
    std::vector<float> out;
    const float scale_inv = 1.0f / s;
    for (float v : x) out.push_back(e4m3_decode(e4m3_encode(v * s)) * scale_inv);
    return out;
}

const json& quantizer_row(const json& tensor, const std::string& quantizer) {
    for (const json& r : tensor["quantizers"])
        if (r["quantizer"] == quantizer) return r;
    static const json none;
    ADD_FAILURE() << "no row for quantizer " << quantizer;
    return none;
}

void expect_figures(const json& row, const Expected& e) {
    EXPECT_NEAR(row["mse"].get<double>(), e.mse, 1e-12 * std::max(1.0, e.mse));
    EXPECT_NEAR(row["sqnr_db"].get<double>(), e.sqnr_db, 1e-9);
    EXPECT_NEAR(row["rel_l2"].get<double>(), e.rel_l2, 1e-12);
    EXPECT_NEAR(row["max_abs_err"].get<double>(), e.max_abs_err, 1e-9);
    EXPECT_NEAR(row["cosine"].get<double>(), e.cosine, 1e-12);
    EXPECT_NEAR(row["underflow_pct"].get<double>(), e.underflow_pct, 1e-9);
}

const std::vector<float> kHand = {1.0f, 2.0f, 448.0f, 500.0f};

// ---- JSON figures ---------------------------------------------------------------------

TEST_F(AnalyzeCli, CurrentScalingOfHandCheckedTensor) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    json doc = analyze_json({path, "--quantizers", "current_e4m3"});
    EXPECT_EQ(doc["tool"], "fp8scope-engine analyze");
    ASSERT_EQ(doc["quantizers"], json::array({"current_e4m3"}));
    ASSERT_EQ(doc["tensors"].size(), 1u);
    EXPECT_TRUE(doc["errors"].empty());
    const json& t = doc["tensors"][0];
    EXPECT_EQ(t["file"], path);
    EXPECT_EQ(t["name"], "hand");
    EXPECT_EQ(t["dtype"], "float32");
    EXPECT_EQ(t["shape"], json::array({4}));
    EXPECT_EQ(t["numel"], 4);

    const json& s = t["stats"];
    EXPECT_EQ(s["amax"].get<double>(), 500.0);
    EXPECT_EQ(s["min_nonzero_abs"].get<double>(), 1.0);
    EXPECT_EQ(s["finite"], 4);
    EXPECT_EQ(s["zero"], 0);
    EXPECT_NEAR(s["mean"].get<double>(), 951.0 / 4, 1e-12);
    EXPECT_NEAR(s["rms"].get<double>(), std::sqrt((1 + 4 + 448.0 * 448 + 500.0 * 500) / 4), 1e-9);
    EXPECT_NEAR(s["dynamic_range"].get<double>(), std::log2(500.0), 1e-12);
    // floor(log2|x|): 1 -> 0, 2 -> 1, 448 and 500 -> 8.
    const json& h = s["histogram"];
    EXPECT_EQ(h["min_exponent"], -149);
    ASSERT_EQ(h["counts"].size(), 277u);
    EXPECT_EQ(h["counts"][0 + 149], 1);
    EXPECT_EQ(h["counts"][1 + 149], 1);
    EXPECT_EQ(h["counts"][8 + 149], 2);
    std::int64_t total = 0;
    for (const json& c : h["counts"]) total += c.get<std::int64_t>();
    EXPECT_EQ(total, 4);
    // Top values: descending |x| with positions (one row, so row 0).
    const json& top = s["outliers"]["top"];
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0]["value"].get<double>(), 500.0);
    EXPECT_EQ(top[0]["col"], 3);
    EXPECT_EQ(top[1]["value"].get<double>(), 448.0);
    EXPECT_EQ(top[1]["col"], 2);
    EXPECT_EQ(top[3]["value"].get<double>(), 1.0);
    EXPECT_EQ(top[3]["row"], 0);
    EXPECT_EQ(s["outliers"]["channel_absmax"], json::array({1.0, 2.0, 448.0, 500.0}));

    // s = 448/500: 500 lands on 448 exactly, nothing saturates.
    const json& r = quantizer_row(t, "current_e4m3");
    const float scale = 448.0f / 500.0f;
    EXPECT_EQ(r["amax"].get<double>(), 500.0);
    EXPECT_EQ(r["scale_inv_min"].get<double>(), double(1.0f / scale));
    EXPECT_EQ(r["scale_inv_max"].get<double>(), double(1.0f / scale));
    EXPECT_EQ(r["overflow_pct"].get<double>(), 0.0);
    expect_figures(r, error_figures(kHand, per_tensor_e4m3(kHand, scale)));
}

TEST_F(AnalyzeCli, DelayedFirstStepSaturatesAndCountsOverflow) {
    // Delayed scaling on a lone tensor is its first step: s = 1. 500 clamps to 448.
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    json doc = analyze_json({path, "--quantizers", "delayed_e4m3"});
    const json& r = doc["tensors"][0]["quantizers"][0];
    EXPECT_EQ(r["overflow_pct"].get<double>(), 25.0);
    EXPECT_EQ(r["max_abs_err"].get<double>(), 52.0);
    EXPECT_EQ(r["mse"].get<double>(), 52.0 * 52.0 / 4);
    EXPECT_EQ(r["scale_inv_min"].get<double>(), 1.0);
    EXPECT_NEAR(r["sqnr_db"].get<double>(), 10 * std::log10((1 + 4 + 448.0 * 448 + 500.0 * 500) / (52.0 * 52.0)),
                1e-9);
}

TEST_F(AnalyzeCli, UnderflowAndExactQuantization) {
    // Under s = 1: 1e-4 is below half the smallest subnormal (2^-10) and flushes to 0;
    // -3e-3 rounds to -2 * 2^-9. One of three nonzero values underflows.
    const std::vector<float> x = {448.0f, 1e-4f, -3e-3f, 0.0f};
    const std::string path = file("small.npy", npy_f32("(1, 4)", x));
    // A tensor of E4M3 values quantizes exactly: sqnr +Inf is written as null.
    const std::string exact = file("exact.npy", npy_f32("(2, 2)", {0.5f, -1.0f, 448.0f, 0.25f}));
    json doc = analyze_json({path, exact, "--quantizers", "delayed_e4m3"});
    ASSERT_EQ(doc["tensors"].size(), 2u);
    const json& r = doc["tensors"][0]["quantizers"][0];
    EXPECT_NEAR(r["underflow_pct"].get<double>(), 100.0 / 3, 1e-12);
    expect_figures(r, error_figures(x, per_tensor_e4m3(x, 1.0f)));
    EXPECT_EQ(doc["tensors"][0]["stats"]["zero"], 1);

    const json& e = doc["tensors"][1]["quantizers"][0];
    EXPECT_TRUE(e["sqnr_db"].is_null());
    EXPECT_EQ(e["mse"].get<double>(), 0.0);
    EXPECT_EQ(e["cosine"].get<double>(), 1.0);
    EXPECT_EQ(doc["tensors"][1]["shape"], json::array({2, 2}));
}

TEST_F(AnalyzeCli, UndefinedFiguresOfAnAllZeroTensorAreNull) {
    // sum x^2 = 0: sqnr, rel_l2 and cosine are 0/0, and no nonzero x leaves underflow 0/0.
    const std::string path = file("zeros.npy", npy_f32("(3,)", {0.0f, 0.0f, 0.0f}));
    json doc = analyze_json({path, "--quantizers", "current_e4m3"});
    const json& r = doc["tensors"][0]["quantizers"][0];
    EXPECT_EQ(r["mse"].get<double>(), 0.0);
    for (const char* undefined : {"sqnr_db", "rel_l2", "cosine", "underflow_pct"})
        EXPECT_TRUE(r[undefined].is_null()) << undefined << " = " << r[undefined];
    EXPECT_EQ(doc["tensors"][0]["stats"]["zero"], 3);
    EXPECT_EQ(doc["tensors"][0]["stats"]["histogram"]["zero"], 3);
}

TEST_F(AnalyzeCli, SafetensorsHalfAndBfloat16) {
    // F16 [1, -2.5, 0.5, 65504] and BF16 [0.15625, -3, 1024] (bits written by hand).
    const std::vector<std::uint16_t> f16 = {0x3C00, 0xC100, 0x3800, 0x7BFF};
    const std::vector<std::uint16_t> bf16 = {0x3E20, 0xC040, 0x4480};
    const std::string header =
        R"({"__metadata__":{"note":"hand"},"grad":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
        R"("layer.0/w":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]}})";
    const std::string path = file("model.safetensors", safetensors(header, raw(f16) + raw(bf16)));
    json doc = analyze_json({path, "--quantizers", "current_e4m3,delayed_e4m3"});
    ASSERT_EQ(doc["tensors"].size(), 2u);
    const json& g = doc["tensors"][0];
    EXPECT_EQ(g["name"], "grad");
    EXPECT_EQ(g["dtype"], "float16");
    EXPECT_EQ(g["shape"], json::array({2, 2}));
    EXPECT_EQ(g["stats"]["amax"].get<double>(), 65504.0);
    EXPECT_EQ(g["quantizers"].size(), 2u);
    // Delayed first step: 65504 saturates; one of four.
    EXPECT_EQ(quantizer_row(g, "delayed_e4m3")["overflow_pct"].get<double>(), 25.0);

    const json& w = doc["tensors"][1];
    EXPECT_EQ(w["name"], "layer.0/w");
    EXPECT_EQ(w["dtype"], "bfloat16");
    EXPECT_EQ(w["stats"]["amax"].get<double>(), 1024.0);
    EXPECT_EQ(w["stats"]["min_nonzero_abs"].get<double>(), 0.15625);
    const std::vector<float> wx = {0.15625f, -3.0f, 1024.0f};
    const float s = 448.0f / 1024.0f;
    expect_figures(quantizer_row(w, "current_e4m3"), error_figures(wx, per_tensor_e4m3(wx, s)));
}

TEST_F(AnalyzeCli, OutlierThresholdAndTopK) {
    // rms of [1, 2, 448, 500] is sqrt(450709 / 4) = 335.7: two of four lie beyond 1 rms.
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    json doc = analyze_json({path, "--quantizers", "current_e4m3", "--outlier-k", "1", "--top-k", "2"});
    const json& o = doc["tensors"][0]["stats"]["outliers"];
    EXPECT_EQ(o["k"].get<double>(), 1.0);
    EXPECT_EQ(o["frac_beyond_k_rms"].get<double>(), 0.5);
    ASSERT_EQ(o["top"].size(), 2u);
    EXPECT_EQ(o["top"][1]["value"].get<double>(), 448.0);
}

TEST_F(AnalyzeCli, DefaultQuantizersOneRowEachInOrder) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    json doc = analyze_json({path});
    ASSERT_GE(doc["quantizers"].size(), 4u);
    const json& rows = doc["tensors"][0]["quantizers"];
    ASSERT_EQ(rows.size(), doc["quantizers"].size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i]["quantizer"], doc["quantizers"][i]);
        EXPECT_EQ(rows[i]["amax"].get<double>(), 500.0);
    }
}

// The option's former name still selects the quantizers, with a one-line notice, and is
// left off the help.
TEST_F(AnalyzeCli, RecipesIsTheOldSpellingOfQuantizers) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    Result old = analyze({path, "--json", "--recipes", "current_e4m3,delayed_e4m3"});
    ASSERT_EQ(old.code, 0) << old.err;
    EXPECT_EQ(old.err, "fp8scope-engine: --recipes is deprecated, use --quantizers\n");
    json doc = analyze_json({path, "--quantizers", "current_e4m3,delayed_e4m3"});
    EXPECT_EQ(json::parse(old.out)["tensors"], doc["tensors"]);
    EXPECT_EQ(json::parse(old.out)["quantizers"], json::array({"current_e4m3", "delayed_e4m3"}));

    Result help = analyze({"--help"});
    EXPECT_NE(help.out.find("--quantizers"), std::string::npos) << help.out;
    EXPECT_EQ(help.out.find("--recipes"), std::string::npos) << help.out;
}

TEST_F(AnalyzeCli, ThreadCountDoesNotChangeFigures) {
    std::vector<float> x(64 * 300);
    std::uint32_t state = 12345;
    for (float& v : x) {
        state = state * 1664525u + 1013904223u;
        v = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 10.0f;
    }
    const std::string path = file("rand.npy", npy_f32("(64, 300)", x));
    json one = analyze_json({path, "--threads", "1"});
    json two = analyze_json({path, "--threads", "2"});
    EXPECT_EQ(one["tensors"], two["tensors"]);
}

TEST_F(AnalyzeCli, NanAndInfAreCountedWithAWarning) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const std::string path = file("nanny.npy", npy_f32("(5,)", {1.0f, nan, -inf, 0.0f, 0.5f}));
    Result r = analyze({path, "--json", "--quantizers", "current_e4m3"});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("fp8scope-engine: warning: " + path + ": tensor 'nanny' has 1 NaN and 1 Inf"),
              std::string::npos)
        << r.err;
    const json s = json::parse(r.out)["tensors"][0]["stats"];
    EXPECT_EQ(s["nan"], 1);
    EXPECT_EQ(s["inf"], 1);
    EXPECT_EQ(s["finite"], 3);
    EXPECT_EQ(s["zero"], 1);
    EXPECT_EQ(s["amax"].get<double>(), 1.0);
    EXPECT_EQ(s["histogram"]["nan"], 1);
    EXPECT_EQ(s["histogram"]["inf"], 1);
}

// ---- text ------------------------------------------------------------------------------

TEST_F(AnalyzeCli, TextTableHasAlignedRowPerQuantizer) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    Result r = analyze({path, "--quantizers", "current_e4m3,delayed_e4m3"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out.rfind(path + ": hand  float32  4  numel 4\n", 0), 0u) << r.out;
    EXPECT_NE(r.out.find("amax 5.0000e+02"), std::string::npos) << r.out;
    std::vector<std::string> table;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);)
        if (line.rfind("  quantizer", 0) == 0 || line.rfind("  current_e4m3", 0) == 0 ||
            line.rfind("  delayed_e4m3", 0) == 0)
            table.push_back(line);
    ASSERT_EQ(table.size(), 3u) << r.out;
    EXPECT_EQ(table[0].size(), table[1].size());
    EXPECT_EQ(table[0].size(), table[2].size());
    for (const char* col : {"sqnr_db", "mse", "rel_l2", "max_abs_err", "cosine", "underflow_pct", "overflow_pct",
                            "scale_inv_min", "scale_inv_max"})
        EXPECT_NE(table[0].find(col), std::string::npos) << col;
    // Delayed first step: overflow 25.00 %, max error 52.
    EXPECT_NE(table[2].find("25.00"), std::string::npos) << table[2];
    EXPECT_NE(table[2].find("5.200e+01"), std::string::npos) << table[2];
}

// ---- bad input ----------------------------------------------------------------------------

struct BadInput {
    const char* kind;
    const char* name;
    std::string bytes;              // empty: the file is not created
    const char* expect_in_problem;  // nullptr: any problem text
};

std::vector<BadInput> bad_inputs() {
    const std::string f32x4 = raw(std::vector<float>{1, 2, 3, 4});
    return {
        {"missing", "missing.npy", "", nullptr},
        {"wrong_magic", "magic.npy", "NOTNUMPY" + std::string(120, ' '), nullptr},
        {"truncated_npy", "trunc.npy", npy("<f4", "(4,)", f32x4.substr(0, 8)), nullptr},
        {"unsupported_npy_dtype", "ints.npy", npy("<i4", "(4,)", f32x4), nullptr},
        {"unsupported_safetensors_dtype", "ints.safetensors",
         safetensors(R"({"ids":{"dtype":"I32","shape":[4],"data_offsets":[0,16]}})", f32x4), nullptr},
        {"header_too_large", "huge.safetensors", u64le(std::uint64_t(1) << 40) + "{}", nullptr},
        {"bad_offsets", "offsets.safetensors",
         safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,400]}})", f32x4), nullptr},
        {"truncated_safetensors", "short.safetensors", u64le(200) + "{\"w\":", nullptr},
        {"empty_tensor", "empty.npy", npy("<f4", "(0, 4)", ""), "empty"},
        {"zero_d_tensor", "scalar.npy", npy("<f4", "()", raw(std::vector<float>{3})), "0-d"},
        {"unknown_extension", "data.txt", "1 2 3", nullptr},
    };
}

class AnalyzeBadInput : public AnalyzeCli, public ::testing::WithParamInterface<BadInput> {};

TEST_P(AnalyzeBadInput, OneErrorLineAndTheOtherFileStillAnalyzed) {
    const BadInput& b = GetParam();
    const std::string bad = b.bytes.empty() ? (dir_ / b.name).string() : file(b.name, b.bytes);
    const std::string good = file("good.npy", npy_f32("(4,)", kHand));
    Result r = analyze({bad, good, "--json", "--quantizers", "current_e4m3"});
    EXPECT_EQ(r.code, 1);
    const std::string prefix = "fp8scope-engine: error: " + bad + ": ";
    ASSERT_EQ(r.err.rfind(prefix, 0), 0u) << r.err;
    const std::string line = r.err.substr(0, r.err.find('\n'));
    EXPECT_GT(line.size(), prefix.size()) << "no problem text";
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    if (b.expect_in_problem) {
        EXPECT_NE(line.find(b.expect_in_problem), std::string::npos) << line;
    }

    const json doc = json::parse(r.out);
    ASSERT_EQ(doc["tensors"].size(), 1u);
    EXPECT_EQ(doc["tensors"][0]["file"], good);
    EXPECT_EQ(doc["tensors"][0]["stats"]["amax"].get<double>(), 500.0);
    ASSERT_EQ(doc["errors"].size(), 1u);
    EXPECT_EQ(doc["errors"][0]["file"], bad);
    EXPECT_EQ(prefix + doc["errors"][0]["error"].get<std::string>(), line);
}

INSTANTIATE_TEST_SUITE_P(Kinds, AnalyzeBadInput, ::testing::ValuesIn(bad_inputs()),
                         [](const auto& info) { return std::string(info.param.kind); });

// ---- usage -------------------------------------------------------------------------------

TEST_F(AnalyzeCli, UsageErrorsExitTwo) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    Result bad_quantizer = analyze({path, "--quantizers", "current_e4m3,bogus_e9m9"});
    EXPECT_EQ(bad_quantizer.code, 2);
    EXPECT_NE(bad_quantizer.err.find("bogus_e9m9"), std::string::npos) << bad_quantizer.err;
    EXPECT_TRUE(bad_quantizer.out.empty());

    EXPECT_EQ(analyze({path, "--frobnicate"}).code, 2);
    EXPECT_EQ(analyze({}).code, 2);
    EXPECT_EQ(analyze({path, "--threads", "-3"}).code, 2);
    EXPECT_EQ(analyze({path, "--top-k", "many"}).code, 2);
}

// ---- dumps -------------------------------------------------------------------------------

struct Npy {
    std::string header;
    std::string data;
};

Npy read_npy_bytes(const fs::path& p) {
    const std::string b = slurp(p);
    EXPECT_GE(b.size(), 10u) << p;
    if (b.size() < 10) return {};
    EXPECT_EQ(b.substr(0, 6), "\x93NUMPY");
    const std::size_t len = static_cast<unsigned char>(b[8]) | (static_cast<unsigned char>(b[9]) << 8);
    EXPECT_EQ((10 + len) % 64, 0u);
    return {b.substr(10, len), b.substr(10 + len)};
}

TEST_F(AnalyzeCli, DumpWritesCodesAndScalesThatDecodeToTheDequantizedValues) {
    // Two rows of 32: one MX block per row. Row 0 amax 5.92, row 1 amax 464.
    std::vector<float> x;
    for (int r = 0; r < 2; ++r)
        for (int k = -16; k < 16; ++k) x.push_back(k * (r == 0 ? 0.37f : 29.0f));
    const std::string path = file("act.npy", npy_f32("(2, 32)", x));
    const fs::path dump = dir_ / "dump";
    Result r = analyze({path, "--quantizers", "current_e4m3,mxfp8_e4m3_rceil", "--dump", dump.string()});
    ASSERT_EQ(r.code, 0) << r.err;

    // current_e4m3: one scale, s = 448 / 464.
    {
        const float s = 448.0f / 464.0f;
        Npy codes = read_npy_bytes(dump / "act.current_e4m3.codes.npy");
        EXPECT_NE(codes.header.find("'descr': '|u1'"), std::string::npos) << codes.header;
        EXPECT_NE(codes.header.find("'shape': (2, 32)"), std::string::npos) << codes.header;
        ASSERT_EQ(codes.data.size(), 64u);
        Npy sinv = read_npy_bytes(dump / "act.current_e4m3.scale_inv.npy");
        EXPECT_NE(sinv.header.find("'descr': '<f4'"), std::string::npos) << sinv.header;
        EXPECT_NE(sinv.header.find("'shape': (1, 1)"), std::string::npos) << sinv.header;
        ASSERT_EQ(sinv.data.size(), 4u);
        float scale_inv;
        std::memcpy(&scale_inv, sinv.data.data(), 4);
        EXPECT_EQ(scale_inv, 1.0f / s);
        for (int i = 0; i < 64; ++i) {
            const auto code = static_cast<std::uint8_t>(codes.data[i]);
            EXPECT_EQ(code, e4m3_encode(x[i] * s)) << i;
            EXPECT_EQ(e4m3_decode(code) * scale_inv, e4m3_decode(e4m3_encode(x[i] * s)) * (1.0f / s)) << i;
        }
        EXPECT_FALSE(fs::exists(dump / "act.current_e4m3.scale_e8m0.npy"));
    }
    // MXFP8 RCEIL: e = ceil(log2(amax / 448)): row 0 -> -6, row 1 -> 1.
    {
        const std::string stem = "act.mxfp8_e4m3_rceil";
        const int e[2] = {-6, 1};
        EXPECT_EQ(e[0], int(std::ceil(std::log2(16 * 0.37 / 448))));
        EXPECT_EQ(e[1], int(std::ceil(std::log2(464.0 / 448))));
        Npy codes = read_npy_bytes(dump / (stem + ".codes.npy"));
        Npy sinv = read_npy_bytes(dump / (stem + ".scale_inv.npy"));
        Npy e8 = read_npy_bytes(dump / (stem + ".scale_e8m0.npy"));
        EXPECT_NE(sinv.header.find("'shape': (2, 1)"), std::string::npos) << sinv.header;
        EXPECT_NE(e8.header.find("'descr': '|u1'"), std::string::npos) << e8.header;
        ASSERT_EQ(codes.data.size(), 64u);
        ASSERT_EQ(sinv.data.size(), 8u);
        ASSERT_EQ(e8.data.size(), 2u);
        for (int row = 0; row < 2; ++row) {
            EXPECT_EQ(static_cast<std::uint8_t>(e8.data[row]), 127 + e[row]);
            float scale_inv;
            std::memcpy(&scale_inv, sinv.data.data() + 4 * row, 4);
            EXPECT_EQ(scale_inv, std::ldexp(1.0f, e[row]));
            for (int c = 0; c < 32; ++c) {
                const int i = row * 32 + c;
                const std::uint8_t want = e4m3_encode(x[i] * std::ldexp(1.0f, -e[row]));
                EXPECT_EQ(static_cast<std::uint8_t>(codes.data[i]), want) << i;
            }
        }
    }
}

TEST_F(AnalyzeCli, DumpWritesFP4CodesAndScales) {
    // 2 x 33: NVFP4 blocks [0,16) [16,32) [32], MXFP4 blocks [0,32) [32] per row.
    // Row 0: amax 6, 12, 3; row 1: zeros and 2688 (A = 2688: S_enc = S_dec = 1).
    std::vector<float> x(66, 0.0f);
    x[0] = 6, x[1] = 0.25f, x[2] = -1.75f, x[16] = 12, x[17] = 1.5f, x[32] = 3;
    x[33 + 20] = 2688;
    const std::string path = file("w.npy", npy_f32("(2, 33)", x));
    const fs::path dump = dir_ / "dump";
    Result r = analyze({path, "--quantizers", "nvfp4,mxfp4_rceil", "--dump", dump.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    const auto header_has = [](const Npy& n, const std::string& descr, const std::string& shape) {
        EXPECT_NE(n.header.find("'descr': '" + descr + "'"), std::string::npos) << n.header;
        EXPECT_NE(n.header.find("'fortran_order': False"), std::string::npos) << n.header;
        EXPECT_NE(n.header.find("'shape': " + shape), std::string::npos) << n.header;
    };
    // NVFP4: s_b = e4m3(amax_b * float(1/6)): 1 (0x38), 2 (0x40), 0.5 (0x30); 0 and 448 (0x7E).
    {
        Npy codes = read_npy_bytes(dump / "w.nvfp4.codes.npy");
        Npy scales = read_npy_bytes(dump / "w.nvfp4.scale_e4m3.npy");
        Npy tsi = read_npy_bytes(dump / "w.nvfp4.tensor_scale_inv.npy");
        header_has(codes, "|u1", "(2, 33)");
        header_has(scales, "|u1", "(2, 3)");
        header_has(tsi, "<f4", "(1,)");
        ASSERT_EQ(codes.data.size(), 66u);
        ASSERT_EQ(scales.data.size(), 6u);
        ASSERT_EQ(tsi.data.size(), 4u);
        float s_dec;
        std::memcpy(&s_dec, tsi.data.data(), 4);
        EXPECT_EQ(s_dec, 1.0f);
        const std::uint8_t want_scales[6] = {0x38, 0x40, 0x30, 0x00, 0x7E, 0x00};
        for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<std::uint8_t>(scales.data[i]), want_scales[i]) << i;
        // 6 -> 7; 0.25 -> 0 (tie to even); -1.75 -> -2 (code 8 | 4); 12 / 2 -> 7; 1.5 / 2 -> 1 (0.75
        // ties to 1.0, code 2); 3 / 0.5 -> 7; 2688 -> 7.
        const std::pair<int, std::uint8_t> want[] = {{0, 7}, {1, 0}, {2, 12}, {16, 7}, {17, 2}, {32, 7}, {53, 7}, {40, 0}};
        for (const auto& [i, code] : want) EXPECT_EQ(static_cast<std::uint8_t>(codes.data[i]), code) << i;
        EXPECT_FALSE(fs::exists(dump / "w.nvfp4.scale_inv.npy"));
        EXPECT_FALSE(fs::exists(dump / "w.nvfp4.scale_e8m0.npy"));
    }
    // MXFP4 RCEIL: 12 = 1.5 * 2^3 -> e = 1; 3 = 1.5 * 2^1 -> e = -1; 2688 = 1.3125 * 2^11 -> e = 9;
    // an all-zero block -> e = -127 (code 0).
    {
        Npy codes = read_npy_bytes(dump / "w.mxfp4_rceil.codes.npy");
        Npy e8 = read_npy_bytes(dump / "w.mxfp4_rceil.scale_e8m0.npy");
        header_has(codes, "|u1", "(2, 33)");
        header_has(e8, "|u1", "(2, 2)");
        ASSERT_EQ(e8.data.size(), 4u);
        const std::uint8_t want_e8[4] = {128, 126, 136, 0};
        for (int i = 0; i < 4; ++i) EXPECT_EQ(static_cast<std::uint8_t>(e8.data[i]), want_e8[i]) << i;
        ASSERT_EQ(codes.data.size(), 66u);
        EXPECT_EQ(static_cast<std::uint8_t>(codes.data[0]), 5);   // 6 / 2 = 3
        EXPECT_EQ(static_cast<std::uint8_t>(codes.data[16]), 7);  // 12 / 2 = 6
        EXPECT_EQ(static_cast<std::uint8_t>(codes.data[32]), 7);  // 3 * 2 = 6
        EXPECT_EQ(static_cast<std::uint8_t>(codes.data[53]), 7);  // 2688 / 512 = 5.25: nearest is 6
        EXPECT_FALSE(fs::exists(dump / "w.mxfp4_rceil.tensor_scale_inv.npy"));
    }
}

TEST_F(AnalyzeCli, AllIncludesTheFP4Quantizers) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    json doc = analyze_json({path, "--quantizers", "all"});
    ASSERT_EQ(doc["quantizers"].size(), 15u);
    EXPECT_EQ(doc["quantizers"][11], "nvfp4");
    EXPECT_EQ(doc["quantizers"][14], "mxfp4_rceil");
    const json& nv = doc["tensors"][0]["quantizers"][11];
    EXPECT_EQ(nv["quantizer"], "nvfp4");
    for (const char* key : {"sqnr_db", "mse", "rel_l2", "max_abs_err", "cosine", "underflow_pct", "overflow_pct",
                            "scale_inv_min", "scale_inv_max", "nonfinite_out"})
        EXPECT_TRUE(nv.contains(key)) << key;
    // The default stays the FP8 quantizers.
    EXPECT_EQ(analyze_json({path})["quantizers"].size(), 11u);
}

TEST_F(AnalyzeCli, DumpNamesAreFilesystemSafe) {
    const std::vector<float> v = {1, 2, 3, 4};
    const std::string header =
        R"({"model.layers/0.w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
        R"("model.layers:0.w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})";
    const std::string path = file("m.safetensors", safetensors(header, raw(v) + raw(v)));
    const fs::path dump = dir_ / "d";
    Result r = analyze({path, "--quantizers", "delayed_e4m3:margin=1", "--dump", dump.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dump)) {
        EXPECT_TRUE(e.is_regular_file());
        names.push_back(e.path().filename().string());
    }
    // Two tensors whose safe names collide stay apart: 2 x (codes, scale_inv).
    ASSERT_EQ(names.size(), 4u);
    for (const auto& n : names) {
        EXPECT_EQ(n.find_first_of(":=/"), std::string::npos) << n;
        EXPECT_NE(n[0], '.') << n;
    }
    EXPECT_TRUE(fs::exists(dump / "model.layers_0.w.delayed_e4m3_margin_1.codes.npy"));
}

TEST_F(AnalyzeCli, DumpDirectoryThatCannotBeCreatedStillReportsFigures) {
    const std::string path = file("hand.npy", npy_f32("(4,)", kHand));
    const std::string blocker = file("not_a_dir", "x");
    const std::string dump = blocker + "/dump";
    Result r = analyze({path, "--json", "--quantizers", "current_e4m3", "--dump", dump});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err.rfind("fp8scope-engine: error: " + dump + ": ", 0), 0u) << r.err;
    const json doc = json::parse(r.out);
    ASSERT_EQ(doc["tensors"].size(), 1u);
    EXPECT_EQ(doc["tensors"][0]["stats"]["amax"].get<double>(), 500.0);
    ASSERT_EQ(doc["errors"].size(), 1u);
    EXPECT_EQ(doc["errors"][0]["file"], dump);
}

// ---- HDF5 report -----------------------------------------------------------------------------

std::string read_string_attr(hid_t obj, const char* name) {
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    EXPECT_GE(a, 0) << name;
    if (a < 0) return {};
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);  // HDF5 does not convert between character sets
    char* s = nullptr;
    EXPECT_GE(H5Aread(a, t, &s), 0) << name;
    std::string out = s ? s : "";
    H5free_memory(s);
    H5Tclose(t);
    H5Aclose(a);
    return out;
}

std::vector<std::int64_t> read_int64_attr(hid_t obj, const char* name) {
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    EXPECT_GE(a, 0) << name;
    if (a < 0) return {};
    hid_t sp = H5Aget_space(a);
    const hssize_t n = H5Sget_simple_extent_npoints(sp);
    std::vector<std::int64_t> v(static_cast<std::size_t>(n));
    EXPECT_GE(H5Aread(a, H5T_NATIVE_INT64, v.data()), 0);
    H5Sclose(sp);
    H5Aclose(a);
    return v;
}

struct ErrorRow {
    char quantizer[64];
    double sqnr_db, overflow_pct, max_abs_err, mse;
};

std::vector<ErrorRow> read_errors(hid_t file, const char* path) {
    hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    EXPECT_GE(ds, 0) << path;
    if (ds < 0) return {};
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, sizeof(ErrorRow::quantizer));
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(ErrorRow));
    H5Tinsert(t, "quantizer", HOFFSET(ErrorRow, quantizer), str);
    H5Tinsert(t, "sqnr_db", HOFFSET(ErrorRow, sqnr_db), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "overflow_pct", HOFFSET(ErrorRow, overflow_pct), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "max_abs_err", HOFFSET(ErrorRow, max_abs_err), H5T_NATIVE_DOUBLE);
    H5Tinsert(t, "mse", HOFFSET(ErrorRow, mse), H5T_NATIVE_DOUBLE);
    hid_t sp = H5Dget_space(ds);
    std::vector<ErrorRow> rows(static_cast<std::size_t>(H5Sget_simple_extent_npoints(sp)));
    EXPECT_GE(H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows.data()), 0);
    H5Sclose(sp);
    H5Tclose(t);
    H5Tclose(str);
    H5Dclose(ds);
    return rows;
}

TEST_F(AnalyzeCli, HdfReportReadsBackWithTheCApi) {
    const std::string hand = file("hand.npy", npy_f32("(4,)", kHand));
    const std::string exact = file("exact.npy", npy_f32("(2, 2)", {0.5f, -1.0f, 448.0f, 0.25f}));
    const fs::path out = dir_ / "report.h5";
    Result r = analyze({hand, exact, "--quantizers", "current_e4m3,delayed_e4m3", "--out", out.string()});
    ASSERT_EQ(r.code, 0) << r.err;
    // The temporary file was renamed: only the report is left beside the inputs.
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"exact.npy", "hand.npy", "report.h5"}));

    hid_t f = H5Fopen(out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    EXPECT_EQ(read_string_attr(f, "format"), "fp8scope-analysis");
    EXPECT_EQ(read_int64_attr(f, "format_version"), std::vector<std::int64_t>{2});
    EXPECT_FALSE(read_string_attr(f, "tool_version").empty());

    hid_t g = H5Gopen2(f, "/tensors/0", H5P_DEFAULT);
    ASSERT_GE(g, 0);
    EXPECT_EQ(read_string_attr(g, "file"), hand);
    EXPECT_EQ(read_string_attr(g, "name"), "hand");
    EXPECT_EQ(read_string_attr(g, "dtype"), "float32");
    EXPECT_EQ(read_int64_attr(g, "shape"), std::vector<std::int64_t>{4});

    std::vector<std::int64_t> hist(277);
    hid_t hd = H5Dopen2(g, "histogram", H5P_DEFAULT);
    ASSERT_GE(hd, 0);
    EXPECT_GE(H5Dread(hd, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, hist.data()), 0);
    EXPECT_EQ(read_int64_attr(hd, "min_exponent"), std::vector<std::int64_t>{-149});
    H5Dclose(hd);
    for (int e = -149; e <= 127; ++e) {
        int want = 0;
        for (float v : kHand) want += std::ilogb(v) == e;
        EXPECT_EQ(hist[e + 149], want) << "exponent " << e;
    }

    struct Top {
        float value;
        std::int64_t row, col;
    };
    hid_t tt = H5Tcreate(H5T_COMPOUND, sizeof(Top));
    H5Tinsert(tt, "value", HOFFSET(Top, value), H5T_NATIVE_FLOAT);
    H5Tinsert(tt, "row", HOFFSET(Top, row), H5T_NATIVE_INT64);
    H5Tinsert(tt, "col", HOFFSET(Top, col), H5T_NATIVE_INT64);
    std::vector<Top> top(4);
    hid_t td = H5Dopen2(g, "top", H5P_DEFAULT);
    ASSERT_GE(td, 0);
    EXPECT_GE(H5Dread(td, tt, H5S_ALL, H5S_ALL, H5P_DEFAULT, top.data()), 0);
    H5Dclose(td);
    H5Tclose(tt);
    EXPECT_EQ(top[0].value, 500.0f);
    EXPECT_EQ(top[0].col, 3);
    EXPECT_EQ(top[1].value, 448.0f);

    std::vector<float> absmax(4);
    hid_t cd = H5Dopen2(g, "channel_absmax", H5P_DEFAULT);
    EXPECT_GE(H5Dread(cd, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, absmax.data()), 0);
    H5Dclose(cd);
    EXPECT_EQ(absmax, kHand);
    H5Gclose(g);

    std::vector<ErrorRow> rows = read_errors(f, "/tensors/0/errors");
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_STREQ(rows[0].quantizer, "current_e4m3");
    EXPECT_STREQ(rows[1].quantizer, "delayed_e4m3");
    const Expected cur = error_figures(kHand, per_tensor_e4m3(kHand, 448.0f / 500.0f));
    EXPECT_NEAR(rows[0].sqnr_db, cur.sqnr_db, 1e-9);
    EXPECT_EQ(rows[0].overflow_pct, 0.0);
    EXPECT_EQ(rows[1].overflow_pct, 25.0);
    EXPECT_EQ(rows[1].max_abs_err, 52.0);
    EXPECT_EQ(rows[1].mse, 676.0);

    // An exact quantization keeps its +Inf sqnr in HDF5.
    std::vector<ErrorRow> exact_rows = read_errors(f, "/tensors/1/errors");
    ASSERT_EQ(exact_rows.size(), 2u);
    EXPECT_TRUE(std::isinf(exact_rows[1].sqnr_db));
    H5Fclose(f);

    if (std::system("command -v h5dump >/dev/null 2>&1") == 0) {
        const fs::path dumped = dir_.parent_path() / (dir_.filename().string() + ".h5dump");
        const std::string cmd = "h5dump -A " + quote(out.string()) + " >" + quote(dumped.string()) + " 2>&1";
        EXPECT_EQ(std::system(cmd.c_str()), 0);
        const std::string text = slurp(dumped);
        EXPECT_NE(text.find("fp8scope-analysis"), std::string::npos) << text;
        EXPECT_NE(text.find("DATASET \"errors\""), std::string::npos) << text;
        EXPECT_NE(text.find("ATTRIBUTE \"quantizers\""), std::string::npos) << text;
        fs::remove(dumped);
    }
}

TEST_F(AnalyzeCli, HdfReportFailureLeavesNoFileAndExitsOne) {
    const std::string hand = file("hand.npy", npy_f32("(4,)", kHand));
    const fs::path out = dir_ / "no_such_dir" / "report.h5";
    Result r = analyze({hand, "--quantizers", "current_e4m3", "--out", out.string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err.rfind("fp8scope-engine: error: " + out.string() + ": ", 0), 0u) << r.err;
    EXPECT_NE(r.out.find("current_e4m3"), std::string::npos) << "the table is still printed";
    EXPECT_FALSE(fs::exists(out.parent_path()));
}

}  // namespace
