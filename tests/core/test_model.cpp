// The model as a whole: its layout, the whole-model gradient against central differences
// of an independent float64 forward, training with plain SGD (the optimizer proper lives
// elsewhere), determinism, recipes and their delayed histories, capture.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "engine/model.h"
#include "engine/model_impl.h"
#include "engine_reference.h"
#include "support/cpu_engine.h"

namespace fp8scope {
namespace {

using fp8scope::testing::CpuModel;
using fp8scope::testing::CpuTrainer;

ModelConfig tiny(NormKind norm, MlpKind mlp, bool bias) {
    ModelConfig c;
    c.vocab_size = 11;
    c.max_seq = 6;
    c.n_layer = 2;
    c.d_model = 8;
    c.n_head = 2;
    c.norm = norm;
    c.mlp = mlp;
    c.bias = bias;
    if (mlp == MlpKind::SwiGLU) c.d_ff = 12;
    return c;
}

ModelConfig small() {
    ModelConfig c;
    c.vocab_size = 16;
    c.max_seq = 32;
    c.n_layer = 2;
    c.d_model = 64;
    c.n_head = 4;
    return c;
}

// A repetitive sequence: the next token is a fixed function of the current one.
void repetitive_batch(int B, int T, std::vector<std::int32_t>& tok, std::vector<std::int32_t>& tgt) {
    tok.resize(std::size_t(B) * T);
    tgt.resize(tok.size());
    for (int b = 0; b < B; ++b)
        for (int t = 0; t < T; ++t) {
            tok[std::size_t(b * T + t)] = (3 * b + t) % 8;
            tgt[std::size_t(b * T + t)] = (3 * b + t + 1) % 8;
        }
}

void sgd_step(Model& m, float lr) {
    auto p = m.params();
    auto g = m.grads();
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= lr * g[i];
}

std::vector<float> train(Model& m, int steps, float lr = 0.1f) {
    std::vector<std::int32_t> tok, tgt;
    repetitive_batch(4, 16, tok, tgt);
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s) {
        losses.push_back(m.forward(tok.data(), tgt.data(), 4, 16));
        m.backward();
        sgd_step(m, lr);
    }
    return losses;
}

TEST(ModelConfig, HiddenAndValidation) {
    ModelConfig c;
    c.d_model = 128;
    EXPECT_EQ(c.hidden(), 512);
    c.mlp = MlpKind::SwiGLU;
    EXPECT_EQ(c.hidden(), 384);  // 8/3 * 128 = 341.3, up to a multiple of 64
    c.d_ff = 100;
    EXPECT_EQ(c.hidden(), 100);
    c.n_head = 3;
    try {
        c.validate();
        FAIL() << "validate accepted d_model 128 with 3 heads";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("n_head"), std::string::npos);
    }
}

TEST(TrainingRecipe, NamedRecipes) {
    EXPECT_FALSE(training_recipe("baseline").quantized());
    auto d = training_recipe("delayed");
    EXPECT_EQ(recipe_format(*d.x), Format::E4M3);
    EXPECT_EQ(recipe_format(*d.dy), Format::E5M2);
    EXPECT_EQ(recipe_format(*training_recipe("delayed_e4m3").dy), Format::E4M3);
    auto b = training_recipe("blockwise");
    EXPECT_EQ(std::get<BlockScaling>(*b.w).block_rows, 128);
    EXPECT_EQ(std::get<BlockScaling>(*b.x).block_rows, 1);
    EXPECT_TRUE(std::get<BlockScaling>(*b.dy).pow2);
    EXPECT_EQ(std::get<MXScaling>(*training_recipe("mxfp8").w).rule, MXRule::RCeil);
    EXPECT_EQ(recipe_format(*training_recipe("current").dy), Format::E5M2);
    for (const auto& n : training_recipe_names()) EXPECT_EQ(training_recipe(n).name, n);
    EXPECT_THROW(training_recipe("fp4"), std::invalid_argument);
    EXPECT_EQ(gemm_name(Gemm::Wgrad), "wgrad");
    EXPECT_EQ(operand_name(Operand::DY), "dy");
}

TEST(Model, ParameterLayoutIsContiguousAndNamed) {
    CpuModel m(tiny(NormKind::LayerNorm, MlpKind::GELU, true));
    std::size_t next = 0;
    std::map<std::string, std::vector<std::int64_t>> shapes;
    for (const auto& t : m.param_tensors()) {
        EXPECT_EQ(t.offset, next) << t.name;
        next += t.numel();
        shapes[t.name] = t.shape;
    }
    EXPECT_EQ(next, m.params().size());
    EXPECT_EQ(m.grads().size(), m.params().size());
    EXPECT_EQ(shapes["blocks.1.attn.qkv.weight"], (std::vector<std::int64_t>{24, 8}));
    EXPECT_EQ(shapes["blocks.0.mlp.fc2.weight"], (std::vector<std::int64_t>{8, 32}));
    EXPECT_EQ(shapes["head.weight"], (std::vector<std::int64_t>{11, 8}));
    ASSERT_EQ(m.linears().size(), 8u);
    EXPECT_EQ(m.linears()[6].name, "blocks.1.mlp.fc1");
    EXPECT_EQ(m.linears()[6].out_features, 32);
    CpuModel r(tiny(NormKind::RMSNorm, MlpKind::SwiGLU, false));
    for (const auto& t : r.param_tensors()) EXPECT_EQ(t.name.find("bias"), std::string::npos) << t.name;
    EXPECT_EQ(r.linears()[2].out_features, 24);  // fc1: gate and up
}

// Whole model: analytic gradients vs central differences of the float64 forward.
void check_model_gradient(const ModelConfig& c) {
    CpuModel m(c);
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.0f, 0.4f);
    for (auto& p : m.params()) p = nd(rng);  // larger than GPT-2 init so every term matters
    const int B = 2, T = 5;
    std::vector<std::int32_t> tok(B * T), tgt(B * T);
    for (int i = 0; i < B * T; ++i) {
        tok[std::size_t(i)] = (7 * i + 3) % c.vocab_size;
        tgt[std::size_t(i)] = (5 * i + 1) % c.vocab_size;
    }
    ref::Vec p64(m.params().begin(), m.params().end());
    float loss = m.forward(tok.data(), tgt.data(), B, T);
    EXPECT_NEAR(loss, ref::model_loss(m, p64, tok, tgt, B, T), 1e-5 * loss);
    m.backward();
    auto num = ref::numeric_grad([&](const ref::Vec& p) { return ref::model_loss(m, p, tok, tgt, B, T); }, p64, 1e-5);
    // Per tensor, relative to that tensor's largest true gradient.
    for (const auto& t : m.param_tensors()) {
        double err = 0, scale = 0;
        for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i) {
            err = std::max(err, std::abs(double(m.grads()[i]) - num[i]));
            scale = std::max(scale, std::abs(num[i]));
        }
        EXPECT_LT(err, 1e-3 * scale + 1e-7) << t.name << " scale " << scale;
    }
}

TEST(Model, GradientMatchesFloat64FiniteDifferencesLayerNormGelu) {
    check_model_gradient(tiny(NormKind::LayerNorm, MlpKind::GELU, true));
}

TEST(Model, GradientMatchesFloat64FiniteDifferencesRMSNormSwiGLUNoBias) {
    check_model_gradient(tiny(NormKind::RMSNorm, MlpKind::SwiGLU, false));
}

// GPT-2's tied head: logits = lnf wte^T, and the head's gradient adds into dwte. The
// float64 reference reads wte for both uses, so the finite differences of wte see both.
TEST(Model, GradientMatchesFloat64FiniteDifferencesTiedEmbeddings) {
    ModelConfig c = tiny(NormKind::LayerNorm, MlpKind::GELU, true);
    c.tie_embeddings = true;
    check_model_gradient(c);
    c = tiny(NormKind::RMSNorm, MlpKind::SwiGLU, false);
    c.tie_embeddings = true;
    check_model_gradient(c);
}

// Llama style: RMSNorm, SwiGLU, no biases, rotary positions, grouped-query attention
// (2 query heads on 1 key/value head, and 4 on 2), untied and tied head.
ModelConfig tiny_llama(int n_head, int n_kv_head, bool tie) {
    ModelConfig c = tiny(NormKind::LayerNorm, MlpKind::GELU, true);
    apply_arch(c, "llama");
    c.n_head = n_head;
    c.n_kv_head = n_kv_head;
    c.d_ff = 12;
    c.rope_theta = 100.0f;  // larger turns at T = 5 than Llama's 10000
    c.tie_embeddings = tie;
    return c;
}

TEST(Model, GradientMatchesFloat64FiniteDifferencesLlamaStyle) {
    check_model_gradient(tiny_llama(2, 1, false));
    check_model_gradient(tiny_llama(4, 2, true));
}

TEST(Model, LlamaStyleLayoutHasNoPositionTableAndANarrowQkv) {
    CpuModel m(tiny_llama(4, 2, false));  // d_model 8, head size 2
    std::map<std::string, std::vector<std::int64_t>> shapes;
    for (const auto& t : m.param_tensors()) shapes[t.name] = t.shape;
    EXPECT_EQ(shapes.count("wpe"), 0u);
    EXPECT_EQ(shapes.count("blocks.0.ln1.bias"), 0u);
    EXPECT_EQ(shapes.count("blocks.0.attn.qkv.bias"), 0u);
    // [q | k | v] = (4 + 2 * 2) heads of 2
    EXPECT_EQ(shapes["blocks.1.attn.qkv.weight"], (std::vector<std::int64_t>{16, 8}));
    EXPECT_EQ(m.linears()[0].out_features, 16);
    EXPECT_EQ(shapes["blocks.0.mlp.fc1.weight"], (std::vector<std::int64_t>{24, 8}));  // [gate | up]
    // Llama-3.2-1B's shape (16 layers, 2048 wide, 32 heads on 8 key/value heads, MLP 8192,
    // tied head) with its vocabulary of 128256: 1,235,814,400 parameters, as published.
    ModelConfig g{.vocab_size = 128256, .max_seq = 2048, .n_layer = 16, .d_model = 2048, .n_head = 32,
                  .n_kv_head = 8, .d_ff = 8192};
    apply_arch(g, "llama");
    g.tie_embeddings = true;
    ParameterTensors p{};
    EXPECT_EQ(carve_params(g, nullptr, p, nullptr), 1235814400u);
}

TEST(ModelConfig, GroupedQueryAndRopeAreChecked) {
    ModelConfig c;
    c.n_kv_head = 3;  // n_head 4
    EXPECT_THROW(
        {
            try {
                c.validate();
            } catch (const std::invalid_argument& e) {
                EXPECT_NE(std::string(e.what()).find("n_kv_head 3 must divide n_head 4"), std::string::npos);
                throw;
            }
        },
        std::invalid_argument);
    c.n_kv_head = 2;
    EXPECT_NO_THROW(c.validate());
    EXPECT_EQ(c.qkv_width(), 128 + 2 * 2 * 32);
    c.d_model = 12;
    c.n_head = 4;  // head size 3
    c.n_kv_head = 0;
    c.pos = PosKind::Rope;
    try {
        c.validate();
        FAIL() << "rope with an odd head size";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("pos = rope needs an even head size"), std::string::npos);
    }
}

// Under the width rule the blocks' matrices start at hidden_std, the embeddings at init_std.
TEST(Model, InitGivesHiddenMatricesTheirOwnStd) {
    ModelConfig c = small();
    c.init_std = 0.05f;
    CpuModel m(c);
    m.init(3, 0.01f);
    auto sd = [&](const std::string& name) {
        for (const auto& t : m.param_tensors())
            if (t.name == name) {
                double s = 0;
                for (std::size_t i = t.offset; i < t.offset + t.numel(); ++i) s += double(m.params()[i]) * m.params()[i];
                return std::sqrt(s / double(t.numel()));
            }
        return -1.0;
    };
    EXPECT_NEAR(sd("wte"), 0.05, 0.005);
    EXPECT_NEAR(sd("blocks.0.mlp.fc1.weight"), 0.01, 0.0005);
    EXPECT_NEAR(sd("blocks.0.mlp.fc2.weight"), 0.01 / 2.0, 0.0005);  // 1/sqrt(2 * 2 layers)
}

TEST(Model, TiedEmbeddingsHaveNoHeadTensor) {
    ModelConfig c = tiny(NormKind::LayerNorm, MlpKind::GELU, true);
    CpuModel untied(c);
    c.tie_embeddings = true;
    CpuModel tied(c);
    EXPECT_EQ(tied.num_params() + std::size_t(c.vocab_size) * std::size_t(c.d_model), untied.num_params());
    for (const auto& t : tied.param_tensors()) EXPECT_NE(t.name, "head.weight");
    // GPT-2 124M counted as llm.c and PyTorch's GPT-2 count it (wte (50257, 768) serves as the head).
    const ModelConfig g{.vocab_size = 50257, .max_seq = 1024, .n_layer = 12, .d_model = 768, .n_head = 12,
                        .tie_embeddings = true};
    ParameterTensors p{};
    EXPECT_EQ(carve_params(g, nullptr, p, nullptr), 124439808u);
}

TEST(Model, BaselineSgdLearnsARepetitiveSequence) {
    CpuModel m(small());
    m.init(1);
    auto losses = train(m, 60);
    EXPECT_NEAR(losses.front(), std::log(16.0), 0.2);  // GPT-2 init: near-uniform predictions
    EXPECT_LT(losses.back(), 0.25f * losses.front());
}

TEST(Model, SameSeedGivesBitwiseIdenticalRuns) {
    for (const char* recipe : {"baseline", "delayed", "mxfp8"}) {
        CpuModel a(small()), b(small());
        a.init(42);
        b.init(42);
        a.set_recipe(training_recipe(recipe));
        b.set_recipe(training_recipe(recipe));
        auto la = train(a, 5), lb = train(b, 5);
        ASSERT_EQ(la.size(), lb.size());
        for (std::size_t i = 0; i < la.size(); ++i)
            EXPECT_EQ(std::memcmp(&la[i], &lb[i], sizeof(float)), 0) << recipe << " step " << i;
        EXPECT_EQ(std::memcmp(a.params().data(), b.params().data(), a.params().size_bytes()), 0) << recipe;
    }
    CpuModel a(small()), c(small());
    a.init(42);
    c.init(43);
    EXPECT_NE(std::memcmp(a.params().data(), c.params().data(), 4096), 0);
}

TEST(Model, EvaluateMatchesForwardAndDoesNotEnableBackward) {
    CpuModel m(small());
    m.init(3);
    std::vector<std::int32_t> tok, tgt;
    repetitive_batch(2, 8, tok, tgt);
    float e = m.evaluate(tok.data(), tgt.data(), 2, 8);
    EXPECT_THROW(m.backward(), std::logic_error);
    EXPECT_EQ(e, m.forward(tok.data(), tgt.data(), 2, 8));
    m.backward();
    EXPECT_THROW(m.backward(), std::logic_error);
    EXPECT_THROW(m.forward(tok.data(), tgt.data(), 1, 33), std::invalid_argument);  // T > max_seq
}

// Counts what a training step hands to the sink.
class CountingSink : public CaptureSink {
public:
    std::map<std::pair<int, int>, int> per_gemm_operand;  // (gemm, operand) -> count
    std::size_t x_history = 0;                             // blocks.0.attn.qkv fprop x
    bool x_delayed = false;
    std::map<std::string, int> ops;
    void on_operand(const OperandCapture& o) override {
        ++per_gemm_operand[{int(o.gemm), int(o.operand)}];
        if (o.linear == 0 && o.gemm == Gemm::Fprop && o.operand == Operand::X) {
            x_delayed = o.delayed != nullptr;
            x_history = o.delayed ? o.delayed->history().size() : 0;
        }
    }
    void on_op(const OpTiming& t) override { ++ops[std::string(t.op)]; }
};

TEST(Model, CaptureStepHandsSixOperandsPerLinearAndTimesOps) {
    CpuModel m(small());
    m.init(1);
    m.set_recipe(training_recipe("current"));
    CountingSink sink;
    m.set_capture(&sink, false);
    train(m, 1);
    EXPECT_TRUE(sink.per_gemm_operand.empty());  // timings only
    EXPECT_EQ(sink.ops["attention"], 2 * 2);     // forward and backward of 2 layers
    EXPECT_EQ(sink.ops["fprop"], 8);
    EXPECT_GT(sink.ops["quantize"], 0);
    m.set_capture(&sink, true);
    train(m, 1);
    ASSERT_EQ(sink.per_gemm_operand.size(), 6u);
    for (const auto& [key, count] : sink.per_gemm_operand) EXPECT_EQ(count, 8) << key.first << "," << key.second;
    sink.ops.clear();
    m.set_capture(nullptr, false);
    train(m, 1);
    EXPECT_TRUE(sink.ops.empty());
}

TEST(Model, SetRecipeSwitchesAndKeepsDelayedHistories) {
    CpuModel m(small());
    m.init(1);
    CountingSink sink;
    m.set_recipe(training_recipe("delayed"));
    train(m, 2);
    m.set_recipe(training_recipe("current"));
    m.set_capture(&sink, true);
    train(m, 1);
    EXPECT_FALSE(sink.x_delayed);
    m.set_recipe(training_recipe("delayed"));
    train(m, 1);
    EXPECT_TRUE(sink.x_delayed);
    EXPECT_EQ(sink.x_history, 2u);  // the two delayed steps before the switch, not the current one
    EXPECT_EQ(m.plan().name(), "delayed");
}

TEST(Model, RecipeStateRestoresDelayedScalingBitwise) {
    CpuModel a(small()), b(small());
    a.init(9);
    a.set_recipe(training_recipe("delayed"));
    train(a, 3);
    std::copy(a.params().begin(), a.params().end(), b.params().begin());
    b.set_recipe(training_recipe("delayed"));
    b.load_recipe_state(a.save_recipe_state());
    float la = train(a, 1)[0], lb = train(b, 1)[0];
    EXPECT_EQ(la, lb);
    EXPECT_EQ(std::memcmp(a.grads().data(), b.grads().data(), a.grads().size_bytes()), 0);
    CpuModel fresh(small());  // without the histories the first delayed step uses scale 1
    std::copy(a.params().begin(), a.params().end(), fresh.params().begin());
    b.load_recipe_state(a.save_recipe_state());
    fresh.set_recipe(training_recipe("delayed"));
    EXPECT_NE(train(fresh, 1)[0], train(b, 1)[0]);
}

TEST(Model, EveryFp8RecipeTrainsCloseToBaseline) {
    for (const auto& name : training_recipe_names()) {
        ModelConfig c = small();
        c.mlp = MlpKind::SwiGLU;
        c.smooth_swiglu = true;
        CpuModel m(c);
        m.init(1);
        m.set_recipe(training_recipe(name));
        auto losses = train(m, 40);
        EXPECT_NEAR(losses.front(), std::log(16.0), 0.2) << name;
        EXPECT_LT(losses.back(), 0.3f * losses.front()) << name;
        for (float l : losses) EXPECT_TRUE(std::isfinite(l)) << name;
    }
}

}  // namespace
}  // namespace fp8scope
