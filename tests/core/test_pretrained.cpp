// Starting from a pretrained checkpoint: small GPT-2 and Llama checkpoints with random
// weights, written here in Hugging Face's names and layouts (Conv1D weights stored
// transposed, shards with an index), are mapped into the engine's parameters; every value
// is checked against the stored one by its own index arithmetic, and every broken
// checkpoint is an error naming the tensor.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/pretrained.h"
#include "engine/train_config.h"
#include "support/cpu_engine.h"
#include "support/error_of.h"
#include "support/hf_checkpoint.h"
#include "support/tiny_config.h"

using namespace fp8scope;
namespace fs = std::filesystem;
using namespace fp8scope::testing;  // error_of, the checkpoint writer
using nlohmann::json;

namespace {

fs::path scratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    fs::path dir = fs::path(::testing::TempDir()) / "fp8scope_pretrained" / info->name();
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

const StTensor& find(const Tensors& ts, const std::string& name) {
    for (const StTensor& t : ts)
        if (t.name == name) return t;
    throw std::out_of_range(name);
}

Tensors without(Tensors ts, const std::string& name) {
    std::erase_if(ts, [&](const StTensor& t) { return t.name == name; });
    return ts;
}

// The engine tensor `name` of a host parameter vector laid out by `table`.
const float* engine(const std::vector<float>& host, const std::vector<ParamTensor>& table, const std::string& name) {
    for (const ParamTensor& t : table)
        if (t.name == name) return host.data() + t.offset;
    ADD_FAILURE() << "no engine tensor " << name;
    static const std::vector<float> zeros(1 << 16);
    return zeros.data();
}

// The engine model and its parameters loaded from the checkpoint at `path`.
struct Loaded {
    CheckpointFiles files;
    PretrainedArch arch;
    ModelConfig config;
    std::vector<ParamTensor> table;
    std::vector<float> host;
};
Loaded load(const std::string& path, int fallback_n_head = 2) {
    Loaded l;
    l.files = open_checkpoint(path);
    l.arch = inspect_pretrained(l.files, fallback_n_head);
    l.config = pretrained_model_config(l.arch, ModelConfig{}, path);
    fp8scope::testing::CpuModel model(l.config, 1);
    l.table = model.param_tensors();
    l.host = load_pretrained(l.files, l.arch, l.table);
    EXPECT_EQ(l.host.size(), model.num_params());
    model.params_from_host(l.host);  // the model takes them as they are
    return l;
}

// Every GPT-2 value where the engine's layout puts it: Conv1D weights (in, out) become
// the engine's (out, in).
void expect_gpt2_values(const Loaded& l, const Tensors& ts, const std::string& prefix) {
    // Hugging Face's name -> the engine's; true: a Conv1D weight, stored (in, out).
    struct Pair {
        const char *engine, *hf;
        bool conv1d;
    };
    const Pair block[] = {{"ln1.weight", "ln_1.weight", false},          {"ln1.bias", "ln_1.bias", false},
                          {"attn.qkv.weight", "attn.c_attn.weight", true}, {"attn.qkv.bias", "attn.c_attn.bias", false},
                          {"attn.proj.weight", "attn.c_proj.weight", true}, {"attn.proj.bias", "attn.c_proj.bias", false},
                          {"ln2.weight", "ln_2.weight", false},          {"ln2.bias", "ln_2.bias", false},
                          {"mlp.fc1.weight", "mlp.c_fc.weight", true},   {"mlp.fc1.bias", "mlp.c_fc.bias", false},
                          {"mlp.fc2.weight", "mlp.c_proj.weight", true}, {"mlp.fc2.bias", "mlp.c_proj.bias", false}};
    auto add = [&](const std::string& engine_name, const std::string& hf, bool conv1d) {
        const StTensor& t = find(ts, prefix + hf);
        const float* e = engine(l.host, l.table, engine_name);
        // (out, in) in the engine: element (o, i) is the stored (i, o).
        const std::int64_t in = conv1d ? t.shape[0] : 1, out = conv1d ? t.shape[1] : std::int64_t(t.values.size());
        for (std::int64_t o = 0; o < out; ++o)
            for (std::int64_t i = 0; i < in; ++i)
                ASSERT_EQ(e[o * in + i], t.values[std::size_t(i * out + o)]) << engine_name << " " << o << "," << i;
    };
    add("wte", "wte.weight", false);
    add("wpe", "wpe.weight", false);
    for (int b = 0; b < kL; ++b)
        for (const Pair& p : block)
            add("blocks." + std::to_string(b) + "." + p.engine, "h." + std::to_string(b) + "." + p.hf, p.conv1d);
    add("ln_f.weight", "ln_f.weight", false);
    add("ln_f.bias", "ln_f.bias", false);
}

}  // namespace

TEST(Pretrained, Gpt2FileWithPrefixAndBuffersMapsEveryValue) {
    const fs::path dir = scratch();
    const Tensors ts = gpt2_tensors("transformer.", false, true);
    const Loaded l = load(write_safetensors(dir / "gpt2.safetensors", ts));
    EXPECT_EQ(l.arch.family, PretrainedFamily::GPT2);
    EXPECT_EQ(l.arch.prefix, "transformer.");
    const ModelConfig& m = l.config;
    EXPECT_EQ(m.vocab_size, kV);
    EXPECT_EQ(m.max_seq, kT);
    EXPECT_EQ(m.n_layer, kL);
    EXPECT_EQ(m.d_model, kC);
    EXPECT_EQ(m.hidden(), 4 * kC);
    EXPECT_EQ(m.n_head, 2);  // no config.json: the fallback
    EXPECT_EQ(m.norm, NormKind::LayerNorm);
    EXPECT_EQ(m.mlp, MlpKind::GELU);
    EXPECT_TRUE(m.bias);
    EXPECT_TRUE(m.tie_embeddings);  // no lm_head.weight
    expect_gpt2_values(l, ts, "transformer.");
}

TEST(Pretrained, Gpt2UntiedHeadWithoutPrefix) {
    const fs::path dir = scratch();
    const Tensors ts = gpt2_tensors("", true, false);
    const Loaded l = load(write_safetensors(dir / "gpt2.safetensors", ts));
    EXPECT_FALSE(l.config.tie_embeddings);
    expect_gpt2_values(l, ts, "");
    const StTensor& head = find(ts, "lm_head.weight");
    const float* e = engine(l.host, l.table, "head.weight");
    for (std::size_t i = 0; i < head.values.size(); ++i) ASSERT_EQ(e[i], head.values[i]);
}

TEST(Pretrained, Bf16ValuesBecomeTheirFloats) {
    const fs::path dir = scratch();
    Tensors ts = gpt2_tensors("", false, false);
    for (StTensor& t : ts) t.dtype = "BF16";
    const Loaded l = load(write_safetensors(dir / "gpt2.safetensors", ts));
    const StTensor& wte = find(ts, "wte.weight");
    const float* e = engine(l.host, l.table, "wte");
    for (std::size_t i = 0; i < wte.values.size(); ++i)
        ASSERT_EQ(e[i], std::bit_cast<float>(std::bit_cast<std::uint32_t>(wte.values[i]) & 0xFFFF0000u));
}

TEST(Pretrained, ShardedFolderLoadsLikeOneFileAndReadsConfigJson) {
    const fs::path dir = scratch();
    const Tensors ts = gpt2_tensors("transformer.", false, true);
    const std::string single = write_safetensors(dir / "one.safetensors", ts);
    const fs::path shards = dir / "sharded";
    fs::create_directories(shards);
    Tensors a(ts.begin(), ts.begin() + long(ts.size() / 2)), b(ts.begin() + long(ts.size() / 2), ts.end());
    write_safetensors(shards / "model-00001-of-00002.safetensors", a);
    write_safetensors(shards / "model-00002-of-00002.safetensors", b);
    json map = json::object();
    for (const StTensor& t : a) map[t.name] = "model-00001-of-00002.safetensors";
    for (const StTensor& t : b) map[t.name] = "model-00002-of-00002.safetensors";
    write_text(shards / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", 1}}}, {"weight_map", map}}.dump());
    write_text(shards / "config.json", R"({"model_type": "gpt2", "n_head": 4, "n_layer": 2, "n_embd": 8,
                                          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05})");
    const Loaded one = load(single), many = load(shards.string());
    EXPECT_EQ(many.files.tensors.size(), ts.size());
    EXPECT_EQ(many.config.n_head, 4);  // config.json's, over the fallback of 2
    EXPECT_TRUE(many.arch.notes.empty());
    EXPECT_EQ(one.config.n_head, 2);
    ASSERT_EQ(many.host.size(), one.host.size());
    EXPECT_EQ(many.host, one.host);
    EXPECT_EQ(load((shards / "model.safetensors.index.json").string()).host, one.host);  // the index named itself

    // The index and the shards must agree.
    json moved = map;
    moved["transformer.wte.weight"] = "model-00002-of-00002.safetensors";
    write_text(shards / "model.safetensors.index.json", json{{"weight_map", moved}}.dump());
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { open_checkpoint(shards.string()); }),
                             "the weight_map puts tensor 'transformer.wte.weight' in " +
                                 (shards / "model-00002-of-00002.safetensors").string() + ", but it is in");
    json extra = map;
    extra["transformer.h.9.ln_1.weight"] = "model-00001-of-00002.safetensors";
    write_text(shards / "model.safetensors.index.json", json{{"weight_map", extra}}.dump());
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { open_checkpoint(shards.string()); }), "'transformer.h.9.ln_1.weight'");
    json short_map = map;
    short_map.erase("transformer.ln_f.bias");
    write_text(shards / "model.safetensors.index.json", json{{"weight_map", short_map}}.dump());
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { open_checkpoint(shards.string()); }),
                             "holds tensor 'transformer.ln_f.bias', which the weight_map does not list");
    fs::create_directories(dir / "empty");
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { open_checkpoint((dir / "empty").string()); }),
                             "neither model.safetensors nor model.safetensors.index.json");
    write_text(dir / "pytorch_model.bin", "x");
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { open_checkpoint((dir / "pytorch_model.bin").string()); }),
                             "not a .safetensors file");
}

TEST(Pretrained, MissingUnknownAndMisshapenTensorsAreNamed) {
    const fs::path dir = scratch();
    const Tensors ts = gpt2_tensors("transformer.", false, true);
    auto inspect_error = [&](const Tensors& t) {
        const std::string path = write_safetensors(dir / "bad.safetensors", t);
        return error_of([&] { inspect_pretrained(open_checkpoint(path), 2); });
    };
    const std::string prefix = (dir / "bad.safetensors").string() + ": GPT-2 checkpoint: ";
    EXPECT_EQ(inspect_error(without(ts, "transformer.h.1.mlp.c_fc.bias")),
              prefix + "missing tensor 'transformer.h.1.mlp.c_fc.bias' (expected shape [32])");
    Tensors extra = ts;
    extra.push_back({"transformer.h.0.attn.rotary", {3}, {1, 2, 3}});
    EXPECT_EQ(inspect_error(extra), prefix + "unknown tensor 'transformer.h.0.attn.rotary' (shape [3])");
    Tensors misshapen = ts;
    for (StTensor& t : misshapen)
        if (t.name == "transformer.h.0.attn.c_attn.weight") t.shape = {3 * kC, kC};  // stored the engine's way round
    EXPECT_EQ(inspect_error(misshapen),
              prefix + "tensor 'transformer.h.0.attn.c_attn.weight' has shape [24, 8], expected [8, 24]");
    // Several problems at once: each named.
    Tensors both = without(extra, "transformer.ln_f.weight");
    const std::string two = inspect_error(both);
    FP8SCOPE_EXPECT_CONTAINS(two, "missing tensor 'transformer.ln_f.weight' (expected shape [8])");
    FP8SCOPE_EXPECT_CONTAINS(two, "unknown tensor 'transformer.h.0.attn.rotary'");
    // A head count that does not divide the width, from the user's config.
    const std::string path = write_safetensors(dir / "ok.safetensors", ts);
    EXPECT_EQ(error_of([&] { inspect_pretrained(open_checkpoint(path), 3); }),
              path + ": d_model 8 is not a multiple of n_head 3 (from the config's model.n_head)");
    // Neither family.
    const std::string other = write_safetensors(dir / "other.safetensors", {{"encoder.weight", {2}, {1, 2}}});
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { inspect_pretrained(open_checkpoint(other), 2); }),
                             "neither a GPT-2 checkpoint (wte.weight) nor a Llama one (model.embed_tokens.weight); its "
                             "tensors: encoder.weight");
}

TEST(Pretrained, ConfigJsonMustAgreeWithTheTensors) {
    const fs::path dir = scratch();
    const std::string path = write_safetensors(dir / "model.safetensors", gpt2_tensors("", false, false));
    write_text(dir / "config.json", R"({"n_head": 2, "n_layer": 3})");
    EXPECT_EQ(error_of([&] { inspect_pretrained(open_checkpoint(path), 2); }),
              (dir / "config.json").string() + ": n_layer 3, but the checkpoint has 2 blocks (h.0 .. h.1)");
    write_text(dir / "config.json", R"({"n_head": "two"})");
    EXPECT_EQ(error_of([&] { inspect_pretrained(open_checkpoint(path), 2); }),
              (dir / "config.json").string() + ": field 'n_head' must be a positive integer, got \"two\"");
    write_text(dir / "config.json", R"({"n_head": 2, "activation_function": "gelu", "tie_word_embeddings": false})");
    // Tied by config.json's word only when there is no head: here it says untied, and there is none.
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { inspect_pretrained(open_checkpoint(dir.string()), 2); }),
                             "missing tensor 'lm_head.weight' (expected shape [260, 8])");
    write_text(dir / "config.json", R"({"n_head": 2, "activation_function": "gelu"})");
    const PretrainedArch a = inspect_pretrained(open_checkpoint(dir.string()), 2);
    ASSERT_EQ(a.notes.size(), 1u);
    EXPECT_NE(a.notes[0].find("activation_function 'gelu'; the engine's GELU is the tanh approximation"),
              std::string::npos);
}

namespace {

// Llama as Hugging Face stores it: C=8, 2 query heads of 4, 1 KV head, MLP 12, untied.
constexpr int kLV = 10, kLH = 12;
Tensors llama_tensors(bool head, unsigned seed = 2) {
    std::mt19937 rng(seed);
    Tensors out;
    auto add = [&](const std::string& name, std::vector<std::int64_t> shape) {
        std::int64_t n = 1;
        for (auto d : shape) n *= d;
        out.push_back({name, shape, random_values(n, rng)});
    };
    add("model.embed_tokens.weight", {kLV, kC});
    for (int l = 0; l < kL; ++l) {
        const std::string h = "model.layers." + std::to_string(l) + ".";
        add(h + "input_layernorm.weight", {kC});
        add(h + "self_attn.q_proj.weight", {kC, kC});
        add(h + "self_attn.k_proj.weight", {4, kC});
        add(h + "self_attn.v_proj.weight", {4, kC});
        add(h + "self_attn.o_proj.weight", {kC, kC});
        add(h + "post_attention_layernorm.weight", {kC});
        add(h + "mlp.gate_proj.weight", {kLH, kC});
        add(h + "mlp.up_proj.weight", {kLH, kC});
        add(h + "mlp.down_proj.weight", {kC, kLH});
    }
    add("model.norm.weight", {kC});
    if (head) add("lm_head.weight", {kLV, kC});
    return out;
}

// The engine layout a Llama model takes: rows [q | k | v] and [gate | up], no positions.
std::vector<ParamTensor> llama_table(bool head) {
    std::vector<ParamTensor> t;
    std::size_t offset = 0;
    auto add = [&](std::string name, std::vector<std::int64_t> shape) {
        t.push_back({std::move(name), offset, shape});
        offset += t.back().numel();
    };
    add("wte", {kLV, kC});
    for (int l = 0; l < kL; ++l) {
        const std::string b = "blocks." + std::to_string(l) + ".";
        add(b + "ln1.weight", {kC});
        add(b + "attn.qkv.weight", {kC + 2 * 4, kC});
        add(b + "attn.proj.weight", {kC, kC});
        add(b + "ln2.weight", {kC});
        add(b + "mlp.fc1.weight", {2 * kLH, kC});
        add(b + "mlp.fc2.weight", {kC, kLH});
    }
    add("ln_f.weight", {kC});
    if (head) add("head.weight", {kLV, kC});
    return t;
}

}  // namespace

TEST(Pretrained, LlamaStacksQkvAndGateUpAndTakesRopeAndKvHeads) {
    const fs::path dir = scratch();
    const Tensors ts = llama_tensors(true);
    const std::string path = write_safetensors(dir / "model.safetensors", ts);
    write_text(dir / "config.json", R"({"model_type": "llama", "num_attention_heads": 2, "num_key_value_heads": 1,
        "hidden_size": 8, "num_hidden_layers": 2, "intermediate_size": 12, "rope_theta": 500000.0,
        "rms_norm_eps": 1e-05, "hidden_act": "silu", "max_position_embeddings": 64, "tie_word_embeddings": false})");
    const CheckpointFiles files = open_checkpoint(dir.string());
    const PretrainedArch a = inspect_pretrained(files, 4);
    EXPECT_EQ(a.family, PretrainedFamily::Llama);
    EXPECT_EQ(a.n_head, 2);
    EXPECT_EQ(a.n_kv_head, 1);
    EXPECT_EQ(a.d_ff, kLH);
    EXPECT_EQ(a.max_seq, 64);
    EXPECT_EQ(a.rope_theta, 500000.0);
    EXPECT_FALSE(a.tie_embeddings);
    EXPECT_TRUE(a.notes.empty());
    const ModelConfig m = pretrained_model_config(a, ModelConfig{}, dir.string());
    EXPECT_EQ(m.pos, PosKind::Rope);
    EXPECT_EQ(m.n_kv_head, 1);
    EXPECT_EQ(m.n_head, 2);
    EXPECT_EQ(m.rope_theta, 500000.0f);
    EXPECT_EQ(m.norm, NormKind::RMSNorm);
    EXPECT_EQ(m.mlp, MlpKind::SwiGLU);
    EXPECT_FALSE(m.bias);
    EXPECT_EQ(m.max_seq, 64);
    EXPECT_EQ(m.qkv_width(), kC + 2 * 4);

    const std::vector<ParamTensor> table = llama_table(true);
    const std::vector<float> host = load_pretrained(files, a, table);
    auto rows = [&](const std::string& engine_name, std::int64_t row0, const std::string& hf) {
        const StTensor& t = find(ts, hf);
        const float* e = engine(host, table, engine_name) + row0 * kC;
        for (std::size_t i = 0; i < t.values.size(); ++i) ASSERT_EQ(e[i], t.values[i]) << engine_name << " " << hf;
    };
    rows("wte", 0, "model.embed_tokens.weight");
    for (int l = 0; l < kL; ++l) {
        const std::string b = "blocks." + std::to_string(l) + ".", h = "model.layers." + std::to_string(l) + ".";
        rows(b + "ln1.weight", 0, h + "input_layernorm.weight");
        rows(b + "attn.qkv.weight", 0, h + "self_attn.q_proj.weight");
        rows(b + "attn.qkv.weight", kC, h + "self_attn.k_proj.weight");
        rows(b + "attn.qkv.weight", kC + 4, h + "self_attn.v_proj.weight");
        rows(b + "attn.proj.weight", 0, h + "self_attn.o_proj.weight");
        rows(b + "ln2.weight", 0, h + "post_attention_layernorm.weight");
        rows(b + "mlp.fc1.weight", 0, h + "mlp.gate_proj.weight");
        rows(b + "mlp.fc1.weight", kLH, h + "mlp.up_proj.weight");
        rows(b + "mlp.fc2.weight", 0, h + "mlp.down_proj.weight");
    }
    rows("ln_f.weight", 0, "model.norm.weight");
    rows("head.weight", 0, "lm_head.weight");

    // Without config.json: the heads from the user's config, the KV heads from k_proj's rows.
    fs::remove(dir / "config.json");
    const PretrainedArch b = inspect_pretrained(open_checkpoint(path), 2);
    EXPECT_EQ(b.n_kv_head, 1);
    EXPECT_EQ(b.rope_theta, 10000.0);  // Hugging Face's default
    // A tied head, a bias Llama has not and a table of another shape are all named.
    EXPECT_TRUE(
        inspect_pretrained(open_checkpoint(write_safetensors(dir / "tied.safetensors", llama_tensors(false))), 2)
            .tie_embeddings);
    Tensors biased = ts;
    biased.push_back({"model.layers.1.self_attn.q_proj.bias", {kC}, std::vector<float>(kC)});
    FP8SCOPE_EXPECT_CONTAINS(
        error_of([&] { inspect_pretrained(open_checkpoint(write_safetensors(dir / "b.safetensors", biased)), 2); }),
        "Llama checkpoint: unknown tensor 'model.layers.1.self_attn.q_proj.bias' (shape [8])");
    std::vector<ParamTensor> wrong = table;
    wrong[2].shape = {kC * 3, kC};  // full-width K and V: not this checkpoint's attention
    FP8SCOPE_EXPECT_CONTAINS(
        error_of([&] { load_pretrained(files, a, wrong); }),
        "the engine's tensor 'blocks.0.attn.qkv.weight' has shape [24, 8], the checkpoint's [16, 8]");
}

TEST(Pretrained, ConfigTakesTheCheckpointsModel) {
    const fs::path dir = scratch();
    const std::string path = write_safetensors(dir / "gpt2.safetensors", gpt2_tensors("", false, false));
    TrainConfig c = fp8scope::testing::tiny_config(1);
    c.model.n_layer = 7;  // replaced by the checkpoint's
    // seq_len 32 is past the checkpoint's 16 positions: the check runs on its model.
    EXPECT_EQ(error_of([&] { apply_overrides(c, {"init_from=" + path}); }), "seq_len 32 exceeds model.max_seq 16");
    apply_overrides(c, {"init_from=" + path, "seq_len=16"});
    EXPECT_EQ(c.model.n_layer, kL);
    EXPECT_EQ(c.model.vocab_size, kV);
    EXPECT_EQ(c.model.max_seq, kT);
    EXPECT_EQ(c.model.n_head, 2);  // tiny_config's: no config.json
    EXPECT_EQ(c.init_from, path);
    // A recorded config keeps its model and does not read the checkpoint again.
    TrainConfig back = train_config_from_json(train_config_to_json(c));
    EXPECT_FALSE(first_difference(back, c));
    fs::remove(path);
    EXPECT_NO_THROW(train_config_from_json(train_config_to_json(c)));
    const fs::path file = dir / "run.json";
    write_text(file, train_config_to_json(c));
    FP8SCOPE_EXPECT_CONTAINS(error_of([&] { load_train_config(file.string()); }), path);
    // Without init_from the field is left out of written configs.
    EXPECT_EQ(train_config_to_json(fp8scope::testing::tiny_config(1)).find("init_from"), std::string::npos);
}

TEST(Pretrained, EveryRunStartsFromTheCheckpointsWeights) {
    const fs::path dir = scratch();
    const std::string path = write_safetensors(dir / "gpt2.safetensors", gpt2_tensors("transformer.", false, true));
    TrainConfig c = fp8scope::testing::tiny_config(1);
    apply_overrides(c, {"init_from=" + path, "seq_len=16", "compare=baseline,delayed", "seeds=2"});
    fp8scope::testing::CpuTrainer t(c);
    const Loaded l = load(path);
    ASSERT_EQ(t.runs(), 4);
    for (int r = 0; r < t.runs(); ++r) EXPECT_EQ(t.model(r).params_to_host(), l.host) << "run " << r;

    // The token file must fit the checkpoint's vocabulary.
    std::vector<std::int32_t> header(256, 0);
    header[0] = 20240520;
    header[1] = 1;
    std::vector<std::uint16_t> tokens(400, 7);
    tokens[123] = kV;  // one past the last token
    header[2] = std::int32_t(tokens.size());
    const fs::path bin = dir / "tokens.bin";
    {
        std::ofstream out(bin, std::ios::binary);
        out.write(reinterpret_cast<const char*>(header.data()), 1024);
        out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
    }
    apply_overrides(c, {"data.source=tokens:" + bin.string(), "compare=[]", "seeds=1"});
    EXPECT_EQ(error_of([&] { fp8scope::testing::CpuTrainer bad(c); }),
              bin.string() + ": token 260 at position 123 is outside the vocabulary (model.vocab_size 260)");
}
