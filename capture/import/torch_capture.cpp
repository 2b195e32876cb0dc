// The capture folder's manifest, checked field by field before any tensor is read.
#include "torch_capture.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "fp8/precision_plan.h"
#include "io/tensor_file.h"
#include "util/json_input.h"

namespace fp8scope::import {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::size_t kMaxLinearName = 128;  // the trace's /meta/linears name column

// Fields of one object of the manifest, each error naming the field's path.
class Fields {
public:
    Fields(const std::string& file, const json& v, std::string where) : file_(file), v_(v), where_(std::move(where)) {
        if (!v_.is_object()) fail("must be an object, got " + show_json(v_));
    }

    [[noreturn]] void fail(const std::string& problem, const std::string& field = "") const {
        std::string at = where_;
        if (!field.empty()) at += (at.empty() ? "" : ".") + field;
        throw CaptureError(file_, (at.empty() ? "" : "'" + at + "' ") + problem);
    }
    const std::string& where() const { return where_; }

    const json& get(const std::string& field) const {
        auto it = v_.find(field);
        if (it == v_.end()) fail("is missing", field);
        return *it;
    }
    bool has(const std::string& field) const { return v_.contains(field) && !v_[field].is_null(); }

    std::string text(const std::string& field) const {
        const json& j = get(field);
        if (!j.is_string()) fail("must be a string, got " + show_json(j), field);
        return j.get<std::string>();
    }
    std::int64_t integer(const std::string& field, std::int64_t min) const {
        const json& j = get(field);
        if (!j.is_number_integer() || (j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(INT64_MAX)))
            fail("must be an integer, got " + show_json(j), field);
        const std::int64_t n = j.get<std::int64_t>();
        if (n < min) fail("must be at least " + std::to_string(min) + ", got " + std::to_string(n), field);
        return n;
    }
    // A number, or null / absent for "not reported" (NaN).
    double number_or_nan(const std::string& field) const {
        if (!has(field)) return std::numeric_limits<double>::quiet_NaN();
        const json& j = v_[field];
        if (!j.is_number()) fail("must be a number or null, got " + show_json(j), field);
        return j.get<double>();
    }
    bool flag(const std::string& field, bool fallback) const {
        if (!has(field)) return fallback;
        const json& j = v_[field];
        if (!j.is_boolean()) fail("must be true or false, got " + show_json(j), field);
        return j.get<bool>();
    }
    const json& array(const std::string& field) const {
        const json& j = get(field);
        if (!j.is_array()) fail("must be an array, got " + show_json(j), field);
        return j;
    }

private:
    const std::string& file_;
    const json& v_;
    std::string where_;
};

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw CaptureError(path, "cannot open: " + std::string(std::strerror(errno)));
    std::ostringstream s;
    s << in.rdbuf();
    if (in.bad()) throw CaptureError(path, "read failed");
    return s.str();
}

Operand operand_from(const Fields& f, const std::string& field) {
    const std::string o = f.text(field);
    if (o == "x") return Operand::X;
    if (o == "w") return Operand::W;
    if (o == "dy") return Operand::DY;
    f.fail("must be x, w or dy, got '" + clip(o) + "'", field);
}

// The GEMMs the hook says read the operand must be the two core/operands.h gives it.
void check_gemms(const Fields& f, Operand o) {
    if (!f.has("gemms")) return;
    const json& g = f.array("gemms");
    const auto [first, second] = operand_gemms(o);
    json want = json::array();
    want.push_back(std::string(gemm_name(first)));
    want.push_back(std::string(gemm_name(second)));
    if (g != want)
        f.fail("must be " + want.dump() + " for operand " + std::string(operand_name(o)) + ", got " + show_json(g),
               "gemms");
}

// A path inside the folder: relative, without "..".
void check_relative(const Fields& f, const std::string& file) {
    const fs::path p(file);
    if (file.empty() || p.is_absolute()) f.fail("must be a path relative to the folder, got '" + clip(file) + "'", "file");
    for (const auto& part : p)
        if (part == "..") f.fail("must stay inside the folder, got '" + clip(file) + "'", "file");
}

void read_linears(const std::string& file, const json& root, TorchCapture& c) {
    const Fields top(file, root, "");
    const json& list = top.array("linears");
    std::set<std::string> names;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const Fields f(file, list[i], "linears[" + std::to_string(i) + "]");
        LinearInfo l;
        l.name = f.text("name");
        if (l.name.empty() || l.name.size() > kMaxLinearName)
            f.fail("must have 1 to " + std::to_string(kMaxLinearName) + " characters, got " +
                       std::to_string(l.name.size()),
                   "name");
        if (!names.insert(l.name).second) f.fail("names a linear listed before: '" + clip(l.name) + "'", "name");
        const std::int64_t layer = f.integer("layer", -1);
        if (layer > std::numeric_limits<int>::max()) f.fail("is too large: " + std::to_string(layer), "layer");
        l.layer = int(layer);
        l.in_features = f.integer("in_features", 1);
        l.out_features = f.integer("out_features", 1);
        c.linears.push_back(std::move(l));
    }
}

void read_steps(const std::string& file, const json& root, TorchCapture& c) {
    const json& list = Fields(file, root, "").array("steps");
    for (std::size_t i = 0; i < list.size(); ++i) {
        const Fields f(file, list[i], "steps[" + std::to_string(i) + "]");
        CapturedStep s;
        s.step = f.integer("step", 1);
        s.loss = f.number_or_nan("loss");
        s.step_ms = f.number_or_nan("step_ms");
        if (s.step_ms < 0) f.fail("must not be negative, got " + std::to_string(s.step_ms), "step_ms");
        s.captured = f.flag("captured", false);
        c.steps.push_back(s);
    }
}

void read_tensors(const std::string& file, const json& root, TorchCapture& c) {
    const json& list = Fields(file, root, "").array("tensors");
    std::map<std::string, int> linear_of;
    for (std::size_t i = 0; i < c.linears.size(); ++i) linear_of[c.linears[i].name] = int(i);
    std::map<std::tuple<std::int64_t, int, int>, std::size_t> seen;  // (step, linear, operand) -> index
    for (std::size_t i = 0; i < list.size(); ++i) {
        const Fields f(file, list[i], "tensors[" + std::to_string(i) + "]");
        CapturedTensor t;
        t.field = f.where();
        t.step = f.integer("step", 1);
        const std::string linear = f.text("linear");
        auto it = linear_of.find(linear);
        if (it == linear_of.end()) f.fail("names no linear of 'linears': '" + clip(linear) + "'", "linear");
        t.linear = it->second;
        t.operand = operand_from(f, "operand");
        check_gemms(f, t.operand);
        t.name = f.text("name");
        t.file = f.text("file");
        check_relative(f, t.file);
        t.dtype = f.text("dtype");
        if (t.dtype != "BF16" && t.dtype != "F16" && t.dtype != "F32" && t.dtype != "F64")
            f.fail("must be BF16, F16, F32 or F64, got '" + clip(t.dtype) + "'", "dtype");
        const json& shape = f.array("shape");
        if (shape.size() != 2 || !shape[0].is_number_integer() || !shape[1].is_number_integer() ||
            shape[0].get<std::int64_t>() < 1 || shape[1].get<std::int64_t>() < 1)
            f.fail("must be [rows, cols] of positive integers, got " + show_json(shape), "shape");
        t.rows = shape[0].get<std::int64_t>();
        t.cols = shape[1].get<std::int64_t>();

        // The layout of core/operands.h: x (N,K), w (M,K), dy (N,M).
        const LinearInfo& l = c.linears[std::size_t(t.linear)];
        const std::int64_t want_cols = t.operand == Operand::DY ? l.out_features : l.in_features;
        if (t.cols != want_cols || (t.operand == Operand::W && t.rows != l.out_features)) {
            const std::string want = t.operand == Operand::W
                                         ? "[" + std::to_string(l.out_features) + ", " + std::to_string(l.in_features) + "]"
                                         : "[N, " + std::to_string(want_cols) + "]";
            f.fail("is " + show_json(shape) + ", but " + std::string(operand_name(t.operand)) + " of linear '" +
                       clip(l.name) + "' (" + std::to_string(l.in_features) + " in, " +
                       std::to_string(l.out_features) + " out) must be " + want,
                   "shape");
        }
        if (!seen.emplace(std::make_tuple(t.step, t.linear, int(t.operand)), i).second)
            f.fail("repeats " + std::string(operand_name(t.operand)) + " of linear '" + clip(l.name) + "' at step " +
                   std::to_string(t.step));
        const Operand other = t.operand == Operand::X ? Operand::DY : Operand::X;
        if (t.operand != Operand::W) {
            auto o = seen.find(std::make_tuple(t.step, t.linear, int(other)));
            if (o != seen.end() && c.tensors[o->second].rows != t.rows)
                f.fail("has " + std::to_string(t.rows) + " rows, but " + std::string(operand_name(other)) +
                           " of the same linear and step (tensors[" + std::to_string(o->second) + "]) has " +
                           std::to_string(c.tensors[o->second].rows),
                       "shape");
        }
        c.tensors.push_back(std::move(t));
    }
}

}  // namespace

TorchCapture read_torch_capture(const std::string& dir) {
    TorchCapture c;
    c.dir = dir;
    c.manifest = (fs::path(dir) / kManifestName).string();
    const std::string& file = c.manifest;
    json root;
    try {
        root = parse_json(read_text(file), 8);
    } catch (const JsonInputError& e) {
        throw CaptureError(file, std::string("invalid JSON: ") + e.what());
    }
    const Fields top(file, root, "");
    const std::string format = top.text("format");
    if (format != kTorchCaptureFormat)
        top.fail("is '" + clip(format) + "', not '" + kTorchCaptureFormat + "'", "format");
    const std::int64_t version = top.integer("version", 1);
    if (version > kTorchCaptureVersion)
        top.fail("is " + std::to_string(version) + ", newer than this build reads (" +
                     std::to_string(kTorchCaptureVersion) + ")",
                 "version");
    c.name = top.has("name") ? top.text("name") : "torch";
    if (c.name.empty()) c.name = "torch";
    c.torch_version = top.has("torch") ? top.text("torch") : "";
    c.created = top.has("created") ? top.text("created") : "";
    c.every = top.integer("every", 1);
    if (c.every > std::numeric_limits<int>::max()) top.fail("is too large: " + std::to_string(c.every), "every");
    c.bytes = top.has("bytes") ? top.integer("bytes", 0) : 0;
    if (top.has("world_size")) {
        const std::int64_t world = top.integer("world_size", 1), rank = top.has("rank") ? top.integer("rank", 0) : 0;
        if (world > std::numeric_limits<int>::max()) top.fail("is too large: " + std::to_string(world), "world_size");
        if (rank >= world) top.fail("must be below world_size " + std::to_string(world) + ", got " + std::to_string(rank), "rank");
        c.rank = int(rank);
        c.world_size = int(world);
    }
    if (top.has("stopped")) {
        const Fields s(file, root["stopped"], "stopped");
        c.stopped_step = s.integer("step", 1);
        c.stopped_reason = s.text("reason");
    }
    c.error = top.has("error") ? top.text("error") : "";
    c.complete = top.flag("complete", false);
    read_linears(file, root, c);
    read_steps(file, root, c);
    read_tensors(file, root, c);
    c.manifest_json = root.dump();
    return c;
}

std::vector<Tensor> load_captured(const TorchCapture& c, const std::vector<const CapturedTensor*>& tensors) {
    std::vector<Tensor> out;
    if (tensors.empty()) return out;
    const std::string path = (fs::path(c.dir) / tensors.front()->file).string();
    std::vector<LoadedTensor> loaded;
    try {
        loaded = read_safetensors(path);
    } catch (const TensorFileError& e) {
        throw CaptureError(path, e.problem() + " (" + c.manifest + ": '" + tensors.front()->field + ".file')");
    }
    static const std::map<std::string, std::string> kLoaded = {
        {"BF16", "bfloat16"}, {"F16", "float16"}, {"F32", "float32"}, {"F64", "float64"}};
    for (const CapturedTensor* t : tensors) {
        auto it = std::find_if(loaded.begin(), loaded.end(), [&](const LoadedTensor& l) { return l.tensor.name == t->name; });
        const std::string ref = " (" + c.manifest + ": '" + t->field + "')";
        if (it == loaded.end()) throw CaptureError(path, "has no tensor '" + clip(t->name) + "'" + ref);
        const std::vector<std::int64_t> want{t->rows, t->cols};
        if (it->tensor.shape != want)
            throw CaptureError(path, "tensor '" + clip(t->name) + "' has shape " + json(it->tensor.shape).dump() +
                                         ", the manifest says " + json(want).dump() + ref);
        if (it->source_dtype != kLoaded.at(t->dtype))
            throw CaptureError(path, "tensor '" + clip(t->name) + "' is " + it->source_dtype + ", the manifest says " +
                                         t->dtype + ref);
        out.push_back(std::move(it->tensor));
    }
    return out;
}

Tensor load_captured(const TorchCapture& c, const CapturedTensor& t) { return std::move(load_captured(c, {&t}).front()); }

}  // namespace fp8scope::import
