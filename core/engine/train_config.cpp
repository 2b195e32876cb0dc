// Strict JSON reading and writing of TrainConfig. One list of fields (visit_fields) drives
// the reader, the writer and the override parser, so the three can never disagree.
#include "engine/train_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/model_impl.h"
#include "engine/pretrained.h"
#include "fp8/training_recipe.h"
#include "io/input_file.h"
#include "util/json_input.h"
#include "util/parallel.h"
#include "util/strprintf.h"

namespace fp8scope {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

struct Limits {
    double lo = -std::numeric_limits<double>::infinity();
    double hi = std::numeric_limits<double>::infinity();
    bool hi_open = false;  // hi itself is out of range (beta < 1)
};

struct Choice {
    std::string_view name;
    int value;
};
const Choice kNorms[] = {{"layernorm", int(NormKind::LayerNorm)}, {"rmsnorm", int(NormKind::RMSNorm)}};
const Choice kMlps[] = {{"gelu", int(MlpKind::GELU)}, {"swiglu", int(MlpKind::SwiGLU)}};
const Choice kPositions[] = {{"learned", int(PosKind::Learned)}, {"rope", int(PosKind::Rope)}};
const Choice kLrRules[] = {{"constant", int(LrRule::Constant)}, {"width", int(LrRule::Width)}};
// The fields model.arch sets (apply_arch).
const char* const kArchFields[] = {"norm", "mlp", "pos", "bias"};

// The one list of fields. V has an overload per field type.
template <class V>
void visit_fields(TrainConfig& c, V& v) {
    const double big = 1 << 30;
    v("device", c.device);
    v("recipe", c.recipe);
    v("compare", c.compare);
    v.recipes("recipes", c.recipes);
    v("steps", c.steps, Limits{0, big});
    v("batch_size", c.batch_size, Limits{1, 1 << 20});
    v("seq_len", c.seq_len, Limits{1, 1 << 20});
    v("seed", c.seed);
    v("seeds", c.seeds, Limits{1, 1024});
    v("threads", c.threads, Limits{0, kMaxThreads});
    v("concurrent_runs", c.concurrent_runs);
    v("capture_every", c.capture_every, Limits{0, big});
    v("blockmap_every", c.blockmap_every, Limits{-1, big});
    v("log_every", c.log_every, Limits{1, big});
    v.injections("inject", c.inject);
    v("init_from", c.init_from);

    v.arch("model.arch", c.model);  // first: the model's other fields override its defaults
    v("model.vocab_size", c.model.vocab_size, Limits{2, 1 << 24});
    v("model.max_seq", c.model.max_seq, Limits{1, 1 << 20});
    v("model.n_layer", c.model.n_layer, Limits{1, 1024});
    v("model.d_model", c.model.d_model, Limits{1, 1 << 16});
    v("model.n_head", c.model.n_head, Limits{1, 1024});
    v("model.n_kv_head", c.model.n_kv_head, Limits{0, 1024});
    v("model.d_ff", c.model.d_ff, Limits{0, 1 << 20});
    v.choice("model.norm", c.model.norm, kNorms);
    v.choice("model.mlp", c.model.mlp, kMlps);
    v.choice("model.pos", c.model.pos, kPositions);
    v("model.rope_theta", c.model.rope_theta, Limits{1, 1e12});
    v("model.bias", c.model.bias);
    v("model.smooth_swiglu", c.model.smooth_swiglu);
    v("model.tie_embeddings", c.model.tie_embeddings);
    v("model.init_std", c.model.init_std, Limits{1e-6, 10});

    v("optimizer.lr", c.optimizer.lr, Limits{0, 10});
    v("optimizer.beta1", c.optimizer.beta1, Limits{0, 1, true});
    v("optimizer.beta2", c.optimizer.beta2, Limits{0, 1, true});
    v("optimizer.eps", c.optimizer.eps, Limits{0, 1});
    v("optimizer.weight_decay", c.optimizer.weight_decay, Limits{0, 10});
    v("optimizer.grad_clip", c.optimizer.grad_clip, Limits{0, 1e9});
    v.choice("optimizer.lr_rule", c.optimizer.lr_rule, kLrRules);
    v("optimizer.base_width", c.optimizer.base_width, Limits{1, 1 << 16});

    v("schedule.warmup_steps", c.schedule.warmup_steps, Limits{0, big});
    v("schedule.min_lr", c.schedule.min_lr, Limits{0, 10});

    v("data.source", c.data.source);
    v("data.val_fraction", c.data.val_fraction, Limits{0.001, 0.9});
    v("data.corpus_bytes", c.data.corpus_bytes, Limits{1024, double(1ll << 34)});
    v("data.corpus_seed", c.data.corpus_seed);

    v("eval.every", c.eval.every, Limits{0, big});
    v("eval.batches", c.eval.batches, Limits{1, 1 << 16});

    v("checkpoint.dir", c.checkpoint.dir);
    v("checkpoint.every", c.checkpoint.every, Limits{0, big});
    v("checkpoint.resume", c.checkpoint.resume);

    v("rewind.enabled", c.rewind.enabled);
    v("rewind.spike_factor", c.rewind.spike_factor, Limits{1, 1e9});
    v("rewind.window", c.rewind.window, Limits{1, 1 << 20});
    v("rewind.snapshot_every", c.rewind.snapshot_every, Limits{1, big});
    v("rewind.max_rewinds", c.rewind.max_rewinds, Limits{0, 1 << 20});

    v("data_parallel.rank_timeout_s", c.data_parallel.rank_timeout_s, Limits{0.1, 86400});
    v("data_parallel.bucket_mb", c.data_parallel.bucket_mb, Limits{0.01, 65536});
    v("data_parallel.grad_dtype", c.data_parallel.grad_dtype);
    v("data_parallel.grad_measure_every", c.data_parallel.grad_measure_every, Limits{0, 1e9});
    v("data_parallel.straggler_margin", c.data_parallel.straggler_margin, Limits{0, 100});
    v("data_parallel.straggler_steps", c.data_parallel.straggler_steps, Limits{1, 1e6});
    v("data_parallel.preflight", c.data_parallel.preflight);
    v("data_parallel.preflight_size", c.data_parallel.preflight_size, Limits{0, 32768});
    v("data_parallel.preflight_margin", c.data_parallel.preflight_margin, Limits{0, 100});
    v("data_parallel.exclude_slow", c.data_parallel.exclude_slow);
    v("data_parallel.elastic", c.data_parallel.elastic);

}

json::json_pointer pointer(std::string_view path) {
    std::string p = "/";
    for (char ch : path) p += ch == '.' ? '/' : ch;
    return json::json_pointer(p);
}

// A value in a message: bounded, however large or deep the value is (json_input.h).
std::string show(const json& j) { return show_json(j); }

std::string range_text(const Limits& l) {
    std::ostringstream s;
    s << "[" << l.lo << ", " << l.hi << (l.hi_open ? ")" : "]");
    return s.str();
}

// Reads fields from a JSON document, remembering which ones exist so that anything left
// over is reported as unknown.
class Reader {
public:
    Reader(const json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

    template <class T>
        requires std::is_arithmetic_v<T> && (!std::is_same_v<T, bool>)
    void operator()(std::string_view path, T& out, Limits lim = {}) {
        const json* j = find(path);
        if (!j) return;
        if (!j->is_number() || (std::is_integral_v<T> && !j->is_number_integer() &&
                                !j->is_number_unsigned()))
            fail(path, *j, std::is_integral_v<T> ? "expected an integer" : "expected a number");
        if constexpr (std::is_same_v<T, std::uint64_t>) {
            if (!j->is_number_unsigned()) fail(path, *j, "expected a non-negative integer");
            out = j->get<std::uint64_t>();
        } else {
            double d = j->get<double>();
            if (!std::isfinite(d) || d < lim.lo || d > lim.hi || (lim.hi_open && d == lim.hi))
                fail(path, *j, "out of range " + range_text(lim));
            out = std::is_integral_v<T> ? static_cast<T>(j->get<std::int64_t>()) : static_cast<T>(d);
        }
    }
    void operator()(std::string_view path, bool& out) {
        const json* j = find(path);
        if (!j) return;
        if (!j->is_boolean()) fail(path, *j, "expected true or false");
        out = j->get<bool>();
    }
    void operator()(std::string_view path, std::string& out) {
        const json* j = find(path);
        if (!j) return;
        if (!j->is_string()) fail(path, *j, "expected a string");
        out = j->get<std::string>();
    }
    // A list of names: a JSON array of strings or one comma-separated string.
    void operator()(std::string_view path, std::vector<std::string>& out) {
        const json* j = find(path);
        if (!j) return;
        out.clear();
        if (j->is_string()) {
            std::string s = j->get<std::string>(), item;
            std::istringstream in(s);
            while (std::getline(in, item, ','))
                if (!item.empty()) out.push_back(item);
            return;
        }
        if (!j->is_array()) fail(path, *j, "expected a list of names");
        for (const auto& e : *j) {
            if (!e.is_string()) fail(path, *j, "expected a list of names");
            out.push_back(e.get<std::string>());
        }
    }
    // "recipes": {"NAME": {"base": R, "overrides": [{"linears": P or [P...], "gemms": G or
    // [G...], "recipe": R}]}}; every key checked here (check_unknown skips a seen field).
    void recipes(std::string_view path, std::vector<CustomRecipe>& out) {
        const json* j = find(path);
        if (!j) return;
        out.clear();
        const std::string at(path);
        if (!j->is_object()) fail(at, *j, "expected an object of custom recipes by name");
        for (auto it = j->begin(); it != j->end(); ++it) {
            const std::string field = at + "." + it.key();
            if (!it->is_object()) fail(field, *it, "expected an object with base and overrides");
            CustomRecipe c;
            c.name = it.key();
            for (auto k = it->begin(); k != it->end(); ++k)
                if (k.key() != "base" && k.key() != "overrides")
                    throw std::invalid_argument(prefix_ + "unknown field '" + clip(field + "." + k.key()) + "'");
            const json* base = it->contains("base") ? &it->at("base") : nullptr;
            if (!base || !base->is_string()) fail(field + ".base", base ? *base : json(), "expected a recipe name");
            c.base = base->get<std::string>();
            if (it->contains("overrides")) {
                const json& list = it->at("overrides");
                if (!list.is_array()) fail(field + ".overrides", list, "expected a list of overrides");
                for (std::size_t i = 0; i < list.size(); ++i)
                    c.overrides.push_back(override_of(list[i], field + ".overrides[" + std::to_string(i) + "]"));
            }
            out.push_back(std::move(c));
        }
    }
    // "inject": [{"step": S, "until": U, "layer": L, "linear": P, "operand": O, "channels":
    // [C...] or "rows": [R...], "scale": F}]; each entry's own checks here, those against
    // the model in validate().
    void injections(std::string_view path, std::vector<Injection>& out) {
        const json* j = find(path);
        if (!j) return;
        out.clear();
        const std::string at(path);
        if (!j->is_array()) fail(at, *j, "expected a list of injections");
        for (std::size_t i = 0; i < j->size(); ++i) {
            const std::string field = at + "[" + std::to_string(i) + "]";
            out.push_back(injection_of((*j)[i], field));
            try {
                check_injection(out.back(), field);
            } catch (const std::invalid_argument& e) {
                throw std::invalid_argument(prefix_ + e.what());
            }
        }
    }
    // "model.arch": "gpt" or "llama" sets the defaults of the fields it names (kArchFields).
    void arch(std::string_view path, ModelConfig& out) {
        const json* j = find(path);
        if (!j) return;
        if (!j->is_string()) fail(path, *j, "expected one of gpt, llama");
        try {
            apply_arch(out, j->get<std::string>());
        } catch (const std::invalid_argument&) {
            fail(path, *j, "expected one of gpt, llama");
        }
    }
    template <class E, std::size_t N>
    void choice(std::string_view path, E& out, const Choice (&choices)[N]) {
        const json* j = find(path);
        if (!j) return;
        std::string names;
        for (const auto& c : choices) {
            if (j->is_string() && j->get<std::string>() == c.name) {
                out = static_cast<E>(c.value);
                return;
            }
            names += (names.empty() ? "" : ", ") + std::string(c.name);
        }
        fail(path, *j, "expected one of " + names);
    }

    // After visiting: every key of the document must be a known field or section.
    void check_unknown(const json& node, const std::string& path) const {
        for (auto it = node.begin(); it != node.end(); ++it) {
            std::string p = path.empty() ? it.key() : path + "." + it.key();
            if (seen_.count(p)) continue;
            if (sections_.count(p)) {
                if (!it->is_object())
                    throw std::invalid_argument(prefix_ + "field '" + p + "' must be an object, got " + show(*it));
                check_unknown(*it, p);
                continue;
            }
            throw std::invalid_argument(prefix_ + "unknown field '" + clip(p) + "'");
        }
    }
    void note_sections(std::string_view path) {
        for (std::size_t dot = path.find('.'); dot != std::string_view::npos; dot = path.find('.', dot + 1))
            sections_.emplace(path.substr(0, dot));
    }

private:
    // One string or a list of them.
    std::vector<std::string> names_of(const json& j, const std::string& field, const char* what) const {
        std::vector<std::string> out;
        if (j.is_string()) return {j.get<std::string>()};
        if (!j.is_array() || j.empty()) fail(field, j, std::string("expected ") + what);
        for (const auto& e : j) {
            if (!e.is_string()) fail(field, j, std::string("expected ") + what);
            out.push_back(e.get<std::string>());
        }
        return out;
    }
    PrecisionOverride override_of(const json& j, const std::string& field) const {
        if (!j.is_object()) fail(field, j, "expected an object with linears, gemms and recipe");
        PrecisionOverride o;
        for (auto k = j.begin(); k != j.end(); ++k) {
            const std::string f = field + "." + k.key();
            if (k.key() == "linears") {
                o.linears = names_of(*k, f, "a linear name pattern or a list of them");
            } else if (k.key() == "gemms") {
                for (const auto& g : names_of(*k, f, "a GEMM (fprop, dgrad, wgrad) or a list of them")) try {
                        o.gemms.push_back(gemm_from_name(g));
                    } catch (const std::invalid_argument& e) {
                        throw std::invalid_argument(prefix_ + "field '" + f + "': " + e.what());
                    }
            } else if (k.key() == "recipe") {
                if (!k->is_string()) fail(f, *k, "expected a recipe name");
                o.recipe = k->get<std::string>();
            } else {
                throw std::invalid_argument(prefix_ + "unknown field '" + clip(f) + "'");
            }
        }
        if (o.linears.empty()) fail(field + ".linears", json(), "expected a linear name pattern or a list of them");
        if (o.recipe.empty()) fail(field + ".recipe", json(), "expected a recipe name");
        return o;
    }

    Injection injection_of(const json& j, const std::string& field) const {
        if (!j.is_object()) fail(field, j, "expected an object with step, linear, operand, channels or rows, scale");
        auto integer = [&](const json& v, const std::string& f) {
            if (!v.is_number_integer() && !v.is_number_unsigned()) fail(f, v, "expected an integer");
            if (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(1) << 62) fail(f, v, "out of range");
            return v.get<std::int64_t>();
        };
        Injection in;
        bool has_step = false, has_scale = false, has_indices = false;
        for (auto k = j.begin(); k != j.end(); ++k) {
            const std::string f = field + "." + k.key();
            if (k.key() == "step") {
                in.step = integer(*k, f), has_step = true;
            } else if (k.key() == "until") {
                in.until = integer(*k, f);
            } else if (k.key() == "layer") {
                const std::int64_t l = integer(*k, f);
                if (l < 0 || l > 1 << 20) fail(f, *k, "expected a block index >= 0");
                in.layer = int(l);
            } else if (k.key() == "linear") {
                if (!k->is_string()) fail(f, *k, "expected a linear name pattern");
                in.linear = k->get<std::string>();
            } else if (k.key() == "operand") {
                if (!k->is_string()) fail(f, *k, "expected x, w or dy");
                try {
                    in.operand = operand_from_name(k->get<std::string>());
                } catch (const std::invalid_argument& e) {
                    throw std::invalid_argument(prefix_ + "field '" + f + "': " + e.what());
                }
            } else if (k.key() == "channels" || k.key() == "rows") {
                if (has_indices) fail(f, *k, "give channels or rows, not both");
                has_indices = true;
                in.rows = k.key() == "rows";
                if (!k->is_array()) fail(f, *k, "expected a list of indices");
                for (const auto& e : *k) in.indices.push_back(integer(e, f));
            } else if (k.key() == "scale") {
                if (!k->is_number()) fail(f, *k, "expected a number");
                in.scale = k->get<float>(), has_scale = true;
            } else {
                throw std::invalid_argument(prefix_ + "unknown field '" + clip(f) + "'");
            }
        }
        if (!has_step) fail(field + ".step", json(), "expected the first step to scale");
        if (in.linear.empty()) fail(field + ".linear", json(), "expected a linear name pattern (\"mlp.fc2\")");
        if (!has_indices) fail(field + ".channels", json(), "expected channels or rows to scale");
        if (!has_scale) fail(field + ".scale", json(), "expected a factor");
        return in;
    }

    const json* find(std::string_view path) {
        note_sections(path);
        seen_.emplace(path);
        const json* node = &root_;
        std::size_t start = 0;
        for (;;) {
            std::size_t dot = path.find('.', start);
            std::string key(path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
            if (!node->is_object()) return nullptr;  // reported by check_unknown
            auto it = node->find(key);
            if (it == node->end()) return nullptr;
            node = &*it;
            if (dot == std::string_view::npos) return node;
            start = dot + 1;
        }
    }
    [[noreturn]] void fail(std::string_view path, const json& value, const std::string& why) const {
        throw std::invalid_argument(prefix_ + "field '" + std::string(path) + "': " + why + ", got " + show(value));
    }

    const json& root_;
    std::string prefix_;
    std::set<std::string, std::less<>> seen_, sections_;
};

// Into an ordered_json (files read in visit order) or a json (overrides, read back).
template <class J>
class Writer {
public:
    template <class T>
    void operator()(std::string_view path, const T& value, Limits = {}) {
        out[typename J::json_pointer(pointer(path).to_string())] = value;
    }
    // Floats as the shortest decimal that reads back as the same float ("0.003", not
    // "0.003000000026077032"), so written configs read as they were typed.
    void operator()(std::string_view path, const float& value, Limits = {}) {
        out[typename J::json_pointer(pointer(path).to_string())] = shortest(value);
    }
    static double shortest(float value) {
        char buf[32];
        const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
        return ec == std::errc() ? std::strtod(std::string(buf, end).c_str(), nullptr) : double(value);
    }
    void recipes(std::string_view path, const std::vector<CustomRecipe>& value) {
        J all = J::object();
        for (const CustomRecipe& c : value) {
            J overrides = J::array();
            for (const PrecisionOverride& o : c.overrides) {
                J one = J::object();
                one["linears"] = o.linears;
                if (!o.gemms.empty()) {
                    J gemms = J::array();
                    for (Gemm g : o.gemms) gemms.push_back(std::string(gemm_name(g)));
                    one["gemms"] = gemms;
                }
                one["recipe"] = o.recipe;
                overrides.push_back(one);
            }
            J r = J::object();
            r["base"] = c.base;
            r["overrides"] = overrides;
            all[c.name] = r;
        }
        out[typename J::json_pointer(pointer(path).to_string())] = all;
    }
    void injections(std::string_view path, const std::vector<Injection>& value) {
        J all = J::array();
        for (const Injection& in : value) {
            J one = J::object();
            one["step"] = in.step;
            if (in.until) one["until"] = *in.until;
            if (in.layer) one["layer"] = *in.layer;
            one["linear"] = in.linear;
            one["operand"] = std::string(operand_name(in.operand));
            one[in.rows ? "rows" : "channels"] = in.indices;
            one["scale"] = shortest(in.scale);
            all.push_back(one);
        }
        out[typename J::json_pointer(pointer(path).to_string())] = all;
    }
    // model.arch is a shorthand of the fields it sets, which are written themselves.
    void arch(std::string_view, const ModelConfig&) {}
    template <class E, std::size_t N>
    void choice(std::string_view path, const E& value, const Choice (&choices)[N]) {
        for (const auto& c : choices)
            if (c.value == static_cast<int>(value))
                out[typename J::json_pointer(pointer(path).to_string())] = std::string(c.name);
    }
    J out = J::object();
};

// How an override's text is to be read: strings are taken literally.
class KindFinder {
public:
    explicit KindFinder(std::string_view path) : path_(path) {}
    template <class T>
    void operator()(std::string_view p, const T&, Limits = {}) {
        if (p != path_) return;
        found = true;
        textual = std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<std::string>>;
    }
    template <class E, std::size_t N>
    void choice(std::string_view p, const E&, const Choice (&)[N]) {
        if (p == path_) found = textual = true;
    }
    void arch(std::string_view p, const ModelConfig&) {
        if (p == path_) found = textual = true;
    }
    void recipes(std::string_view p, const std::vector<CustomRecipe>&) { found = found || p == path_; }
    void injections(std::string_view p, const std::vector<Injection>&) { found = found || p == path_; }
    bool found = false, textual = false;

private:
    std::string_view path_;
};

// What a config read is for: a step of several overrides (field checks only), one given
// by a user (init_from resolved, then every check) or one read back (every check).
enum class Reading { Partial, Given, Recorded };

// A run resuming a checkpoint trains the model it recorded: init_from is not read again.
void resolve_given(TrainConfig& c) {
    if (c.checkpoint.resume.empty()) resolve_init_from(c);
}

TrainConfig from_json(const json& root, const std::string& prefix, Reading reading) {
    if (!root.is_object()) throw std::invalid_argument(prefix + "a config must be a JSON object");
    TrainConfig c;
    Reader reader(root, prefix);
    visit_fields(c, reader);
    reader.check_unknown(root, "");
    if (reading == Reading::Partial) return c;
    try {
        if (reading == Reading::Given) resolve_given(c);
        c.validate();
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(prefix + e.what());
    }
    return c;
}

}  // namespace

std::vector<std::string> TrainConfig::run_recipes() const {
    std::vector<std::string> runs;
    for (const std::string& r : compare.empty() ? std::vector<std::string>{recipe} : compare)
        runs.insert(runs.end(), std::size_t(seeds), r);
    return runs;
}

void TrainConfig::validate() const {
    model.validate();
    if (seq_len > model.max_seq)
        throw std::invalid_argument("seq_len " + std::to_string(seq_len) + " exceeds model.max_seq " +
                                    std::to_string(model.max_seq));
    if (schedule.min_lr > optimizer.lr)
        throw std::invalid_argument("schedule.min_lr " + std::to_string(schedule.min_lr) +
                                    " exceeds optimizer.lr " + std::to_string(optimizer.lr));
    bool bytes = data.source == "builtin" || data.source.rfind("text:", 0) == 0;
    if (bytes && model.vocab_size < 256)
        throw std::invalid_argument("model.vocab_size " + std::to_string(model.vocab_size) +
                                    (init_from.empty() ? "" : " (" + clip(init_from) + "'s)") +
                                    " is too small for byte-level data (needs 256)" +
                                    (init_from.empty() ? "" : ": train on its tokenizer's tokens, --data tokens:FILE"));
    if (data.source.empty()) throw std::invalid_argument("data.source is empty");
    if (device != "cpu" && device != "cuda")
        throw std::invalid_argument("device '" + clip(device) + "' is not one of cpu, cuda");
    const std::string& g = data_parallel.grad_dtype;
    if (g != "f32" && g != "bf16" && g != "e4m3" && g != "e5m2")
        throw std::invalid_argument("data_parallel.grad_dtype '" + clip(g) + "' is not one of f32, bf16, e4m3, e5m2");
    const RecipeBook book = recipe_book();  // checks each custom recipe's names
    const std::vector<LinearInfo> linears = model_linears(model);
    for (const CustomRecipe& c : recipes) (void)book.plan(c.name, linears);  // patterns against the model
    (void)resolve_injections(inject, linears, std::int64_t(batch_size) * seq_len);
    for (const auto& name : run_recipes()) {
        try {
            book.check(name);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(std::string(compare.empty() ? "recipe" : "compare") + ": " + clip(e.what(), 160));
        }
    }
}

namespace {
// base_width / d_model under the width rule, else 1.
double width_factor(const TrainConfig& c) {
    return c.optimizer.lr_rule == LrRule::Width ? double(c.optimizer.base_width) / c.model.d_model : 1.0;
}
}  // namespace

float TrainConfig::peak_lr() const { return float(optimizer.lr * width_factor(*this)); }
float TrainConfig::final_lr() const { return float(schedule.min_lr * width_factor(*this)); }
float TrainConfig::hidden_init_std() const { return float(model.init_std * std::sqrt(width_factor(*this))); }

float width_rule_lr(int d_model) { return float(double(kWidthRuleLr) * kWidthRuleBase / d_model); }

std::string lr_warning(const TrainConfig& c) {
    const float lr = c.peak_lr(), bound = width_rule_lr(c.model.d_model);
    if (!(lr > kWidthRuleMargin * bound)) return {};
    return strprintf(
        "peak learning rate %.3g is above %.0fx the width rule's %.3g for d_model %d (rule: lr = %.3g * %d "
        "/ d_model, docs/models.md) and is likely to blow up; suggested: --lr %.3g, or "
        "--set optimizer.lr_rule=width to scale a base-width lr",
        double(lr), double(kWidthRuleMargin), double(bound), c.model.d_model, double(kWidthRuleLr),
        kWidthRuleBase, double(bound));
}

std::vector<std::string> preset_dirs(const std::string& installed, const std::string& source) {
    std::vector<std::string> dirs;
    if (const char* env = std::getenv("FP8SCOPE_PRESETS"); env && *env) dirs.emplace_back(env);
    if (!installed.empty()) dirs.push_back(installed);
    if (!source.empty()) dirs.push_back(source);
    return dirs;
}

std::vector<std::string> list_presets(const std::vector<std::string>& dirs) {
    namespace fs = std::filesystem;
    std::vector<std::string> names;
    for (const std::string& d : dirs) {
        std::error_code ec;
        if (!fs::is_directory(d, ec)) continue;
        for (const auto& e : fs::directory_iterator(d, ec))
            if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
        break;
    }
    std::sort(names.begin(), names.end());
    return names;
}

std::string find_preset(const std::string& name, const std::vector<std::string>& dirs) {
    namespace fs = std::filesystem;
    const std::vector<std::string> names = list_presets(dirs);
    if (std::find(names.begin(), names.end(), name) != names.end())
        for (const std::string& d : dirs) {
            std::error_code ec;
            if (fs::is_directory(d, ec)) return (fs::path(d) / (name + ".json")).string();
        }
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    if (known.empty()) {
        std::string searched;
        for (const std::string& d : dirs) searched += (searched.empty() ? "" : ", ") + d;
        throw std::invalid_argument("preset '" + clip(name) + "': no preset folder found (searched " + searched + ")");
    }
    throw std::invalid_argument("preset '" + clip(name) + "' is not one of " + known);
}

namespace {
TrainConfig parse_config(std::string_view json_text, std::string_view origin, Reading reading) {
    std::string prefix = origin.empty() ? "" : std::string(origin) + ": ";
    json root;
    try {
        root = parse_json(json_text);  // bounded depth, no duplicate keys
    } catch (const JsonInputError& e) {
        throw std::invalid_argument(prefix + "invalid JSON: " + e.what());
    }
    return from_json(root, prefix, reading);
}
}  // namespace

TrainConfig train_config_from_json(std::string_view json_text, std::string_view origin) {
    return parse_config(json_text, origin, Reading::Recorded);
}

TrainConfig load_train_config(const std::string& path) {
    // A config is a few KB; the limit keeps a wrong path (a data file) from being parsed.
    constexpr std::uint64_t kMaxConfigBytes = 64u << 20;
    return parse_config(read_regular_file(path, "config file", kMaxConfigBytes), path, Reading::Given);
}

void resolve_init_from(TrainConfig& config, std::vector<std::string>* notes) {
    if (config.init_from.empty()) return;
    const CheckpointFiles files = open_checkpoint(config.init_from);
    const PretrainedArch arch = inspect_pretrained(files, config.model.n_head);
    config.model = pretrained_model_config(arch, config.model, config.init_from);
    if (notes) *notes = arch.notes;
}

namespace {

ordered_json as_json(const TrainConfig& config) {
    Writer<ordered_json> w;
    visit_fields(const_cast<TrainConfig&>(config), w);  // the writer only reads
    return std::move(w.out);
}

std::optional<ConfigDifference> differ(const ordered_json& a, const ordered_json& b, const std::string& at) {
    if (!a.is_object() || !b.is_object()) {
        if (a == b) return std::nullopt;
        return ConfigDifference{at, dump_json(a), dump_json(b)};
    }
    for (auto it = a.begin(); it != a.end(); ++it) {  // both hold every field (visit_fields)
        const std::string field = at.empty() ? it.key() : at + "." + it.key();
        if (auto d = differ(it.value(), b.at(it.key()), field)) return d;
    }
    return std::nullopt;
}

}  // namespace

std::string train_config_to_json(const TrainConfig& config) {
    // Fields in visit order: readable files; a non-UTF-8 path prints with U+FFFD instead of aborting.
    // One seed, concurrent runs and no init_from are left out: such configs and traces read as
    // before those fields.
    ordered_json j = as_json(config);
    if (config.seeds == 1) j.erase("seeds");
    if (config.concurrent_runs) j.erase("concurrent_runs");
    if (config.init_from.empty()) j.erase("init_from");
    return dump_json(j, 2);
}

std::optional<ConfigDifference> first_difference(const TrainConfig& a, const TrainConfig& b) {
    return differ(as_json(a), as_json(b), "");
}

namespace {
void apply_one(TrainConfig& config, std::string_view assignment, bool partial) {
    std::string prefix = "--set " + clip(assignment) + ": ";
    std::size_t eq = assignment.find('=');
    if (eq == std::string_view::npos || eq == 0)
        throw std::invalid_argument(prefix + "expected FIELD=VALUE");
    std::string_view path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
    KindFinder kind(path);
    visit_fields(config, kind);
    if (!kind.found) throw std::invalid_argument(prefix + "unknown field '" + clip(path) + "'");
    json value;
    if (kind.textual && !(text.size() && text.front() == '[')) {
        value = std::string(text);
    } else {
        try {
            value = parse_json(text);
        } catch (const JsonInputError&) {
            value = std::string(text);  // reported as a type error
        }
    }
    Writer<json> w;  // straight into a json: no dump and re-parse of a non-UTF-8 path
    visit_fields(config, w);
    json doc = std::move(w.out);
    if (path == "model.arch")  // the architecture's defaults replace the fields it sets
        for (const char* f : kArchFields) doc["model"].erase(f);
    doc[pointer(path)] = value;
    config = from_json(doc, prefix, partial ? Reading::Partial : Reading::Given);
}
}  // namespace

void apply_override(TrainConfig& config, std::string_view assignment) { apply_one(config, assignment, false); }

void apply_overrides(TrainConfig& config, const std::vector<std::string>& assignments) {
    for (const auto& a : assignments) apply_one(config, a, true);
    resolve_given(config);
    config.validate();
}

}  // namespace fp8scope
