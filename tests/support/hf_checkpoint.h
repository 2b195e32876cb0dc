// Small Hugging Face checkpoints written from scratch for the tests of --init-from:
// a .safetensors writer (F32, or BF16 as the values' upper halves) and GPT-2's tensors
// under its names and layout (Conv1D weights stored (in, out)), with random values.
#pragma once

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace fp8scope::testing {

struct StTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
    std::string dtype = "F32";  // or BF16: the values' upper halves
};
using Tensors = std::vector<StTensor>;

inline void write_text(const std::filesystem::path& p, const std::string& text) {
    std::ofstream(p, std::ios::binary) << text;
}

inline std::string write_safetensors(const std::filesystem::path& p, const Tensors& tensors) {
    nlohmann::json header = nlohmann::json::object();
    std::string buffer;
    for (const StTensor& t : tensors) {
        const std::size_t begin = buffer.size();
        for (float v : t.values) {
            const std::uint32_t bits = std::bit_cast<std::uint32_t>(v);
            const int bytes = t.dtype == "BF16" ? 2 : 4;
            const std::uint32_t stored = t.dtype == "BF16" ? bits >> 16 : bits;
            for (int i = 0; i < bytes; ++i) buffer += char((stored >> (8 * i)) & 0xFF);
        }
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, buffer.size()}}};
    }
    const std::string text = header.dump();
    std::string file;
    for (int i = 0; i < 8; ++i) file += char((std::uint64_t(text.size()) >> (8 * i)) & 0xFF);
    write_text(p, file + text + buffer);
    return p.string();
}

inline std::vector<float> random_values(std::int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = d(rng);
    return v;
}

// GPT-2 as Hugging Face stores it: V=260 (byte data fits), C=8, 2 blocks, 16 positions.
constexpr int kV = 260, kC = 8, kL = 2, kT = 16;
inline Tensors gpt2_tensors(const std::string& prefix, bool head, bool buffers, unsigned seed = 1) {
    std::mt19937 rng(seed);
    Tensors out;
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape) {
        std::int64_t n = 1;
        for (auto d : shape) n *= d;
        out.push_back({prefix + name, shape, random_values(n, rng)});
    };
    add("wte.weight", {kV, kC});
    add("wpe.weight", {kT, kC});
    for (int l = 0; l < kL; ++l) {
        const std::string h = "h." + std::to_string(l) + ".";
        add(h + "ln_1.weight", {kC});
        add(h + "ln_1.bias", {kC});
        add(h + "attn.c_attn.weight", {kC, 3 * kC});
        add(h + "attn.c_attn.bias", {3 * kC});
        add(h + "attn.c_proj.weight", {kC, kC});
        add(h + "attn.c_proj.bias", {kC});
        add(h + "ln_2.weight", {kC});
        add(h + "ln_2.bias", {kC});
        add(h + "mlp.c_fc.weight", {kC, 4 * kC});
        add(h + "mlp.c_fc.bias", {4 * kC});
        add(h + "mlp.c_proj.weight", {4 * kC, kC});
        add(h + "mlp.c_proj.bias", {kC});
        if (buffers) {
            add(h + "attn.bias", {1, 1, kT, kT});
            add(h + "attn.masked_bias", {});
        }
    }
    add("ln_f.weight", {kC});
    add("ln_f.bias", {kC});
    if (head) out.push_back({"lm_head.weight", {kV, kC}, random_values(kV * kC, rng)});
    return out;
}

}  // namespace fp8scope::testing
