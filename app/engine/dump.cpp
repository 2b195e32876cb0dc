// Writes the codes and scales of `analyze --dump` (layout in dump.h).
#include "dump.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "cpu/fp4.h"
#include "cpu/quantize.h"
#include "io/tensor_file.h"

namespace fp8scope::cli {

std::string safe_file_name(const std::string& name) {
    std::string out;
    for (char c : name) {
        const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          c == '.' || c == '_' || c == '-' || c == '+';
        out += keep ? c : '_';
    }
    // No hidden files and no "." or ".." path parts.
    if (out.empty() || out[0] == '.') out.insert(out.begin(), '_');
    return out;
}

namespace {

void dump_fp4(MatrixView m, const Recipe& r, const std::string& prefix, int threads) {
    const FP4Tensor q = quantize_fp4(m, r, threads);
    write_npy(prefix + ".codes.npy", {q.rows, q.cols}, q.codes.data());
    const std::vector<std::int64_t> grid = {q.scale_rows(), q.scale_cols()};
    if (q.nvfp4) {
        write_npy(prefix + ".scale_e4m3.npy", grid, q.scale_codes.data());
        write_npy(prefix + ".tensor_scale_inv.npy", {1}, &q.tensor_scale_inv);
    } else {
        write_npy(prefix + ".scale_e8m0.npy", grid, q.scale_codes.data());
    }
}

}  // namespace

Dumper::Dumper(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec || !std::filesystem::is_directory(dir_))
        throw std::runtime_error(dir_ + ": cannot create dump directory" + (ec ? ": " + ec.message() : ""));
}

std::string Dumper::unique_stem(const std::string& tensor_name) {
    const std::string base = safe_file_name(tensor_name);
    std::string stem = base;
    for (int n = 2; used_.count(stem); ++n) stem = base + "_" + std::to_string(n);
    used_.insert(stem);
    return stem;
}

void Dumper::dump(const Tensor& t, const std::vector<Recipe>& recipes, int threads) {
    const MatrixView m = t.matrix();
    const std::string stem = (std::filesystem::path(dir_) / unique_stem(t.name)).string();
    for (const Recipe& r : recipes) {
        if (is_fp4(r)) {
            dump_fp4(m, r, stem + "." + safe_file_name(recipe_name(r)), threads);
            continue;
        }
        // A lone tensor under delayed scaling is its first step (s = 1): no state.
        const QuantizedTensor q = quantize(m, r, nullptr, threads);
        const std::string prefix = stem + "." + safe_file_name(recipe_name(r));
        write_npy(prefix + ".codes.npy", {q.rows, q.cols}, q.codes.data());
        write_npy(prefix + ".scale_inv.npy", {q.scale_rows(), q.scale_cols()}, q.scale_inv.data());
        if (std::holds_alternative<MXScaling>(r))
            write_npy(prefix + ".scale_e8m0.npy", {q.scale_rows(), q.scale_cols()}, q.scale_e8m0.data());
    }
}

}  // namespace fp8scope::cli
