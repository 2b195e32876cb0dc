// A checkpoint's family and model from its tensor names and shapes (and config.json), the
// map from its names to the engine's parameters, and the loading of the weights into the
// engine's parameter layout.
#include "engine/pretrained.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <stdexcept>

#include "io/input_file.h"
#include "io/tensor_file.h"
#include "util/json_input.h"

namespace fp8scope {
namespace {

using nlohmann::json;
using Shape = std::vector<std::int64_t>;

// The engine's norms use this epsilon (kernels' kNormEps): config.json's is compared with it.
constexpr double kEngineNormEps = 1e-5;

std::string show_shape(const Shape& s) {
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

std::int64_t numel(const Shape& s) {
    std::int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
}

// config.json beside the weights: the fields the model needs, type-checked.
class HfConfig {
public:
    explicit HfConfig(const std::string& path) : path_(path) {
        if (path.empty()) return;
        constexpr std::uint64_t kMaxBytes = 16u << 20;
        try {
            j_ = parse_json(read_regular_file(path, "model config", kMaxBytes));
        } catch (const JsonInputError& e) {
            throw std::invalid_argument(path + ": invalid JSON: " + e.what());
        }
        if (!j_.is_object()) throw std::invalid_argument(path + ": expected a JSON object");
    }
    bool present() const { return !path_.empty(); }
    const std::string& path() const { return path_; }
    std::optional<int> positive(const char* name) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_number_integer() || v->get<std::int64_t>() < 1 || v->get<std::int64_t>() > (1 << 30))
            fail(name, *v, "a positive integer");
        return int(v->get<std::int64_t>());
    }
    std::optional<double> number(const char* name) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_number()) fail(name, *v, "a number");
        return v->get<double>();
    }
    std::optional<bool> boolean(const char* name) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_boolean()) fail(name, *v, "true or false");
        return v->get<bool>();
    }
    std::optional<std::string> text(const char* name) const {
        const json* v = find(name);
        if (!v) return std::nullopt;
        if (!v->is_string()) fail(name, *v, "a string");
        return v->get<std::string>();
    }
    bool has(const char* name) const { return find(name) != nullptr; }

private:
    const json* find(const char* name) const {  // absent and null are the same: not given
        if (!present() || !j_.contains(name) || j_[name].is_null()) return nullptr;
        return &j_[name];
    }
    [[noreturn]] void fail(const char* name, const json& v, const char* want) const {
        throw std::invalid_argument(path_ + ": field '" + name + "' must be " + want + ", got " + show_json(v));
    }
    std::string path_;
    json j_;
};

// Known non-parameter buffers some exports keep: GPT-2's causal mask (attn.bias,
// attn.masked_bias) and old Llama exports' RoPE frequencies (rotary_emb.inv_freq).
bool is_buffer(const PretrainedArch& a, const std::string& name) {
    auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0; };
    if (a.family == PretrainedFamily::GPT2)
        return name.rfind(a.prefix + "h.", 0) == 0 && (ends(".attn.bias") || ends(".attn.masked_bias"));
    return name.rfind("model.layers.", 0) == 0 && ends(".self_attn.rotary_emb.inv_freq");
}

// The number of blocks: one more than the largest index after `stem` ("h." or "model.layers.").
int count_layers(const CheckpointFiles& f, const std::string& stem) {
    int layers = 0;
    for (const auto& [name, t] : f.tensors) {
        if (name.rfind(stem, 0) != 0) continue;
        std::size_t i = stem.size(), dot = name.find('.', i);
        if (dot == std::string::npos || dot == i || dot - i > 6) continue;
        const auto digit = [](char ch) { return ch >= '0' && ch <= '9'; };
        if (!std::all_of(name.begin() + std::ptrdiff_t(i), name.begin() + std::ptrdiff_t(dot), digit)) continue;
        layers = std::max(layers, std::stoi(name.substr(i, dot - i)) + 1);
    }
    return layers;
}

// Every checkpoint tensor against the map: the problems, each naming the tensor.
void check_names(const CheckpointFiles& f, const PretrainedArch& a) {
    std::vector<std::string> problems;
    std::set<std::string> used;
    for (const TensorSource& s : pretrained_map(a))
        for (const TensorSource::Part& p : s.parts) {
            used.insert(p.name);
            auto it = f.tensors.find(p.name);
            if (it == f.tensors.end())
                problems.push_back("missing tensor '" + p.name + "' (expected shape " + show_shape(p.shape) + ")");
            else if (it->second.shape != p.shape)
                problems.push_back("tensor '" + p.name + "' has shape " + show_shape(it->second.shape) + ", expected " +
                                   show_shape(p.shape));
        }
    for (const auto& [name, t] : f.tensors)
        if (!used.count(name) && !is_buffer(a, name))
            problems.push_back("unknown tensor '" + clip(name) + "' (shape " + show_shape(t.shape) + ")");
    if (problems.empty()) return;
    constexpr std::size_t kShown = 6;
    std::string text = f.path + ": " + pretrained_family_name(a.family) + " checkpoint: ";
    for (std::size_t i = 0; i < std::min(problems.size(), kShown); ++i) text += (i ? "; " : "") + problems[i];
    if (problems.size() > kShown) text += "; and " + std::to_string(problems.size() - kShown) + " more";
    throw std::invalid_argument(text);
}

// The 2-D shape of `name`, or an error naming what it should be.
Shape matrix(const CheckpointFiles& f, const std::string& name, const char* expected) {
    const Shape& s = f.tensors.at(name).shape;
    if (s.size() != 2 || s[0] < 1 || s[1] < 1)
        throw std::invalid_argument(f.path + ": tensor '" + name + "' has shape " + show_shape(s) + ", expected " +
                                    expected);
    return s;
}

void inspect_gpt2(const CheckpointFiles& f, const HfConfig& cfg, PretrainedArch& a) {
    const std::string P = a.prefix;
    const Shape wte = matrix(f, P + "wte.weight", "[vocab, d_model]");
    a.vocab_size = int(wte[0]);
    a.d_model = int(wte[1]);
    a.n_layer = count_layers(f, P + "h.");
    const std::string fc = P + "h.0.mlp.c_fc.weight", wpe = P + "wpe.weight";
    a.d_ff = f.tensors.count(fc) && f.tensors.at(fc).shape.size() == 2 ? int(f.tensors.at(fc).shape[1])
                                                                      : cfg.positive("n_inner").value_or(4 * a.d_model);
    a.max_seq = f.tensors.count(wpe) && f.tensors.at(wpe).shape.size() == 2 ? int(f.tensors.at(wpe).shape[0])
                                                                           : cfg.positive("n_positions").value_or(1024);
    if (auto want = cfg.positive("n_layer"); want && *want != a.n_layer)
        throw std::invalid_argument(cfg.path() + ": n_layer " + std::to_string(*want) + ", but the checkpoint has " +
                                    std::to_string(a.n_layer) + " blocks (h.0 .. h." + std::to_string(a.n_layer - 1) + ")");
    if (auto want = cfg.positive("n_embd"); want && *want != a.d_model)
        throw std::invalid_argument(cfg.path() + ": n_embd " + std::to_string(*want) + ", but " + P +
                                    "wte.weight has " + std::to_string(a.d_model) + " columns");
    if (auto n = cfg.positive("n_head")) a.n_head = *n;
    if (auto act = cfg.text("activation_function"); act && *act != "gelu_new" && *act != "gelu_pytorch_tanh")
        a.notes.push_back(cfg.path() + ": activation_function '" + clip(*act) +
                          "'; the engine's GELU is the tanh approximation (gelu_new)");
    if (auto eps = cfg.number("layer_norm_epsilon"); eps && std::abs(*eps - kEngineNormEps) > 1e-12)
        a.notes.push_back(cfg.path() + ": layer_norm_epsilon " + dump_json(json(*eps)) + "; the engine's norms use 1e-5");
}

void inspect_llama(const CheckpointFiles& f, const HfConfig& cfg, PretrainedArch& a) {
    const Shape emb = matrix(f, "model.embed_tokens.weight", "[vocab, d_model]");
    a.vocab_size = int(emb[0]);
    a.d_model = int(emb[1]);
    a.n_layer = count_layers(f, "model.layers.");
    const std::string gate = "model.layers.0.mlp.gate_proj.weight";
    if (f.tensors.count(gate) && f.tensors.at(gate).shape.size() == 2) a.d_ff = int(f.tensors.at(gate).shape[0]);
    else if (auto h = cfg.positive("intermediate_size")) a.d_ff = *h;
    else throw std::invalid_argument(f.path + ": missing tensor '" + gate + "' (its rows are the MLP width)");
    if (auto want = cfg.positive("num_hidden_layers"); want && *want != a.n_layer)
        throw std::invalid_argument(cfg.path() + ": num_hidden_layers " + std::to_string(*want) +
                                    ", but the checkpoint has " + std::to_string(a.n_layer) + " layers");
    if (auto want = cfg.positive("hidden_size"); want && *want != a.d_model)
        throw std::invalid_argument(cfg.path() + ": hidden_size " + std::to_string(*want) +
                                    ", but model.embed_tokens.weight has " + std::to_string(a.d_model) + " columns");
    if (auto n = cfg.positive("num_attention_heads")) a.n_head = *n;
    if (auto kv = cfg.positive("num_key_value_heads")) a.n_kv_head = *kv;
    a.max_seq = cfg.positive("max_position_embeddings").value_or(0);
    a.rope_theta = cfg.number("rope_theta").value_or(10000.0);
    if (auto act = cfg.text("hidden_act"); act && *act != "silu")
        throw std::invalid_argument(cfg.path() + ": hidden_act '" + clip(*act) + "'; the engine's SwiGLU uses silu");
    if (cfg.has("rope_scaling"))
        a.notes.push_back(cfg.path() + ": rope_scaling is not applied; the engine's RoPE uses rope_theta alone");
    if (auto eps = cfg.number("rms_norm_eps"); eps && std::abs(*eps - kEngineNormEps) > 1e-12)
        a.notes.push_back(cfg.path() + ": rms_norm_eps " + dump_json(json(*eps)) + "; the engine's norms use 1e-5");
}

// Llama's head width and KV heads, once n_head is known: KV heads from config.json, else
// from k_proj's rows.
void llama_heads(const CheckpointFiles& f, const HfConfig& cfg, PretrainedArch& a) {
    const int hd = a.d_model / a.n_head;
    if (auto want = cfg.positive("head_dim"); want && *want != hd)
        throw std::invalid_argument(cfg.path() + ": head_dim " + std::to_string(*want) +
                                    "; the engine's heads are d_model / n_head = " + std::to_string(hd) + " wide");
    const std::string k = "model.layers.0.self_attn.k_proj.weight";
    if (a.n_kv_head == 0) {
        const auto it = f.tensors.find(k);
        const bool rows = it != f.tensors.end() && it->second.shape.size() == 2 && it->second.shape[0] % hd == 0;
        a.n_kv_head = rows ? int(it->second.shape[0] / hd) : a.n_head;
    }
    if (a.n_kv_head < 1 || a.n_head % a.n_kv_head != 0)
        throw std::invalid_argument(f.path + ": n_head " + std::to_string(a.n_head) +
                                    " is not a multiple of n_kv_head " + std::to_string(a.n_kv_head));
}

// Llama's attention: rotary position embeddings (Hugging Face's half-split rotate_half,
// the engine's pairing too) and n_kv_head shared KV heads.
void apply_llama_attention(const PretrainedArch& a, ModelConfig& m) {
    m.pos = PosKind::Rope;
    if (a.rope_theta > 0) m.rope_theta = float(a.rope_theta);  // else the engine's 10000, Hugging Face's default
    m.n_kv_head = a.n_kv_head;
}

}  // namespace

const char* pretrained_family_name(PretrainedFamily f) { return f == PretrainedFamily::GPT2 ? "GPT-2" : "Llama"; }

PretrainedArch inspect_pretrained(const CheckpointFiles& f, int fallback_n_head) {
    const HfConfig cfg(f.config_json);
    PretrainedArch a;
    std::string head;
    if (f.tensors.count("wte.weight") || f.tensors.count("transformer.wte.weight")) {
        a.family = PretrainedFamily::GPT2;
        a.prefix = f.tensors.count("transformer.wte.weight") ? "transformer." : "";
        inspect_gpt2(f, cfg, a);
        head = "lm_head.weight";
    } else if (f.tensors.count("model.embed_tokens.weight")) {
        a.family = PretrainedFamily::Llama;
        inspect_llama(f, cfg, a);
        head = "lm_head.weight";
    } else {
        std::string first;
        for (const auto& [name, t] : f.tensors) {
            if (first.size() > 120) break;
            first += (first.empty() ? "" : ", ") + clip(name, 40);
        }
        throw std::invalid_argument(f.path + ": neither a GPT-2 checkpoint (wte.weight) nor a Llama one "
                                             "(model.embed_tokens.weight); its tensors: " + first);
    }
    if (a.n_layer < 1)
        throw std::invalid_argument(f.path + ": " + pretrained_family_name(a.family) + " checkpoint without blocks (no " +
                                    (a.family == PretrainedFamily::GPT2 ? a.prefix + "h.0.*" : "model.layers.0.*") +
                                    " tensors)");
    // Tied: no head of its own, unless config.json says the head is separate.
    a.tie_embeddings = !f.tensors.count(head) && cfg.boolean("tie_word_embeddings").value_or(true);
    const bool from_file = a.n_head > 0;
    if (!from_file) a.n_head = fallback_n_head;
    const std::string origin = from_file ? cfg.path() : "the config's model.n_head";
    if (a.n_head < 1 || a.d_model % a.n_head != 0)
        throw std::invalid_argument(f.path + ": d_model " + std::to_string(a.d_model) + " is not a multiple of n_head " +
                                    std::to_string(a.n_head) + " (from " + origin + ")");
    if (a.family == PretrainedFamily::Llama) llama_heads(f, cfg, a);
    check_names(f, a);
    return a;
}

ModelConfig pretrained_model_config(const PretrainedArch& a, const ModelConfig& user, const std::string& path) {
    ModelConfig m = user;
    m.vocab_size = a.vocab_size;
    m.n_layer = a.n_layer;
    m.d_model = a.d_model;
    m.d_ff = a.d_ff;
    m.n_head = a.n_head;
    m.tie_embeddings = a.tie_embeddings;
    if (a.family == PretrainedFamily::GPT2) {
        m.max_seq = a.max_seq;
        m.norm = NormKind::LayerNorm;
        m.mlp = MlpKind::GELU;
        m.bias = true;
    } else {
        if (a.max_seq > 0) m.max_seq = a.max_seq;
        m.norm = NormKind::RMSNorm;
        m.mlp = MlpKind::SwiGLU;
        m.bias = false;
        apply_llama_attention(a, m);
    }
    try {
        m.validate();
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(path + ": " + e.what());
    }
    return m;
}

std::vector<TensorSource> pretrained_map(const PretrainedArch& a) {
    const std::int64_t V = a.vocab_size, C = a.d_model, H = a.d_ff;
    std::vector<TensorSource> out;
    auto one = [&](std::string engine, Shape shape, std::string name, bool transpose = false) {
        Shape stored = transpose ? Shape{shape[1], shape[0]} : shape;
        out.push_back({std::move(engine), shape, {{std::move(name), stored, transpose}}});
    };
    if (a.family == PretrainedFamily::GPT2) {
        const std::string P = a.prefix;
        one("wte", {V, C}, P + "wte.weight");
        one("wpe", {a.max_seq, C}, P + "wpe.weight");
        for (int l = 0; l < a.n_layer; ++l) {
            const std::string b = "blocks." + std::to_string(l) + ".", h = P + "h." + std::to_string(l) + ".";
            one(b + "ln1.weight", {C}, h + "ln_1.weight");
            one(b + "ln1.bias", {C}, h + "ln_1.bias");
            one(b + "attn.qkv.weight", {3 * C, C}, h + "attn.c_attn.weight", true);  // Conv1D: (in, out)
            one(b + "attn.qkv.bias", {3 * C}, h + "attn.c_attn.bias");
            one(b + "attn.proj.weight", {C, C}, h + "attn.c_proj.weight", true);
            one(b + "attn.proj.bias", {C}, h + "attn.c_proj.bias");
            one(b + "ln2.weight", {C}, h + "ln_2.weight");
            one(b + "ln2.bias", {C}, h + "ln_2.bias");
            one(b + "mlp.fc1.weight", {H, C}, h + "mlp.c_fc.weight", true);
            one(b + "mlp.fc1.bias", {H}, h + "mlp.c_fc.bias");
            one(b + "mlp.fc2.weight", {C, H}, h + "mlp.c_proj.weight", true);
            one(b + "mlp.fc2.bias", {C}, h + "mlp.c_proj.bias");
        }
        one("ln_f.weight", {C}, P + "ln_f.weight");
        one("ln_f.bias", {C}, P + "ln_f.bias");
    } else {
        const std::int64_t hd = C / a.n_head, Q = a.n_head * hd, KV = a.n_kv_head * hd;
        one("wte", {V, C}, "model.embed_tokens.weight");
        for (int l = 0; l < a.n_layer; ++l) {
            const std::string b = "blocks." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
            one(b + "ln1.weight", {C}, h + "input_layernorm.weight");
            // Rows [q | k | v]: both sides use the half-split RoPE, so q and k copy as stored.
            out.push_back({b + "attn.qkv.weight",
                           {Q + 2 * KV, C},
                           {{h + "self_attn.q_proj.weight", {Q, C}},
                            {h + "self_attn.k_proj.weight", {KV, C}},
                            {h + "self_attn.v_proj.weight", {KV, C}}}});
            one(b + "attn.proj.weight", {C, Q}, h + "self_attn.o_proj.weight");
            one(b + "ln2.weight", {C}, h + "post_attention_layernorm.weight");
            out.push_back({b + "mlp.fc1.weight",  // rows [gate | up]: out = silu(gate) * up
                           {2 * H, C},
                           {{h + "mlp.gate_proj.weight", {H, C}}, {h + "mlp.up_proj.weight", {H, C}}}});
            one(b + "mlp.fc2.weight", {C, H}, h + "mlp.down_proj.weight");
        }
        one("ln_f.weight", {C}, "model.norm.weight");
    }
    if (!a.tie_embeddings) one("head.weight", {V, C}, "lm_head.weight");
    return out;
}

std::vector<float> load_pretrained(const CheckpointFiles& f, const PretrainedArch& a,
                                   const std::vector<ParamTensor>& table) {
    std::size_t n = 0;
    std::map<std::string, const ParamTensor*> by_name;
    for (const ParamTensor& t : table) {
        n = std::max(n, t.offset + t.numel());
        by_name[t.name] = &t;
    }
    std::vector<float> host(n);
    // Where each checkpoint tensor goes: rows of an engine tensor, in the engine's orientation.
    struct Place {
        float* dst;
        std::int64_t rows, cols;
        bool transpose, done = false;
    };
    std::map<std::string, Place> places;
    const std::string what = f.path + ": " + pretrained_family_name(a.family) + " checkpoint: ";
    for (const TensorSource& s : pretrained_map(a)) {
        auto it = by_name.find(s.engine);
        if (it == by_name.end())
            throw std::invalid_argument(what + "the engine's model has no tensor '" + s.engine + "'");
        if (it->second->shape != s.shape)
            throw std::invalid_argument(what + "the engine's tensor '" + s.engine + "' has shape " +
                                        show_shape(it->second->shape) + ", the checkpoint's " + show_shape(s.shape));
        by_name.erase(it->first);
        const std::int64_t cols = s.shape.size() == 2 ? s.shape[1] : 1;
        std::int64_t row = 0;
        for (const TensorSource::Part& p : s.parts) {
            const std::int64_t rows = numel(p.shape) / cols;
            places[p.name] = {host.data() + it->second->offset + std::size_t(row * cols), rows, cols, p.transpose};
            row += rows;
        }
    }
    if (!by_name.empty())
        throw std::invalid_argument(what + "the engine's tensor '" + by_name.begin()->first + "' has no counterpart in it");

    std::set<std::string> files;
    for (const auto& [name, t] : f.tensors)
        if (places.count(name)) files.insert(t.file);
    for (const std::string& file : files)
        for (const LoadedTensor& t : read_safetensors(file)) {
            auto it = places.find(t.tensor.name);
            if (it == places.end()) continue;
            Place& p = it->second;
            if (std::int64_t(t.tensor.data.size()) != p.rows * p.cols)  // the file changed since its header was read
                throw std::invalid_argument(file + ": tensor '" + t.tensor.name + "' has shape " +
                                            show_shape(t.tensor.shape) + ", expected " +
                                            std::to_string(p.rows * p.cols) + " values");
            const float* src = t.tensor.data.data();
            if (!p.transpose) std::copy(src, src + p.rows * p.cols, p.dst);
            else  // stored (cols, rows)
                for (std::int64_t i = 0; i < p.cols; ++i)
                    for (std::int64_t j = 0; j < p.rows; ++j) p.dst[j * p.cols + i] = src[i * p.rows + j];
            p.done = true;
        }
    for (const auto& [name, p] : places)
        if (!p.done) throw std::invalid_argument(what + "missing tensor '" + name + "'");
    return host;
}

}  // namespace fp8scope
