// TrainConfig: strict JSON loading (every error names the field and the value), dotted
// overrides, round trips, and the shipped configs in resources/configs.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>

#include "engine/train_config.h"

using namespace fp8scope;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(no error)";
}

std::string json_error(const std::string& text) {
    return error_of([&] { train_config_from_json(text, "run.json"); });
}

#define EXPECT_CONTAINS(haystack, needle) \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

TEST(TrainConfig, ReadsNestedFieldsAndKeepsDefaultsForTheRest) {
    TrainConfig c = train_config_from_json(R"({
        "model": {"d_model": 192, "n_head": 6, "norm": "rmsnorm", "mlp": "swiglu"},
        "optimizer": {"lr": 0.001, "weight_decay": 0.05},
        "schedule": {"warmup_steps": 7},
        "data": {"source": "text:corpus.txt", "val_fraction": 0.25},
        "compare": ["baseline", "delayed"],
        "steps": 123, "batch_size": 4, "seed": 18446744073709551615
    })");
    EXPECT_EQ(c.model.d_model, 192);
    EXPECT_EQ(c.model.n_head, 6);
    EXPECT_EQ(c.model.norm, NormKind::RMSNorm);
    EXPECT_EQ(c.model.mlp, MlpKind::SwiGLU);
    EXPECT_EQ(c.model.n_layer, ModelConfig{}.n_layer);
    EXPECT_FLOAT_EQ(c.optimizer.lr, 0.001f);
    EXPECT_FLOAT_EQ(c.optimizer.weight_decay, 0.05f);
    EXPECT_FLOAT_EQ(c.optimizer.beta2, OptimizerConfig{}.beta2);
    EXPECT_EQ(c.schedule.warmup_steps, 7);
    EXPECT_EQ(c.data.source, "text:corpus.txt");
    EXPECT_DOUBLE_EQ(c.data.val_fraction, 0.25);
    EXPECT_EQ(c.run_recipes(), (std::vector<std::string>{"baseline", "delayed"}));
    EXPECT_EQ(c.steps, 123);
    EXPECT_EQ(c.batch_size, 4);
    EXPECT_EQ(c.seed, 18446744073709551615ull);
}

TEST(TrainConfig, JsonRoundTripIsExact) {
    TrainConfig c;
    c.model.d_model = 96;
    c.model.n_head = 3;
    c.optimizer.lr = 1.7e-3f;
    c.compare = {"mxfp8", "baseline"};
    c.checkpoint.dir = "ck";
    c.rewind.enabled = false;
    std::string once = train_config_to_json(c);
    TrainConfig back = train_config_from_json(once);
    EXPECT_EQ(train_config_to_json(back), once);
    EXPECT_EQ(back.optimizer.lr, c.optimizer.lr);
    EXPECT_EQ(back.compare, c.compare);
    EXPECT_FALSE(back.rewind.enabled);
}

TEST(TrainConfig, TheFirstDifferenceNamesItsFieldAndBothValues) {
    TrainConfig a, b;
    EXPECT_FALSE(first_difference(a, b).has_value());
    b.model.n_head = a.model.n_head * 2;
    b.optimizer.lr = 0.5f;  // later in a config file than the model
    auto d = first_difference(a, b);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->field, "model.n_head");
    EXPECT_EQ(d->a, std::to_string(a.model.n_head));
    EXPECT_EQ(d->b, std::to_string(b.model.n_head));
    b.model.n_head = a.model.n_head;
    d = first_difference(a, b);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->field, "optimizer.lr");
    EXPECT_EQ(d->b, "0.5");
    b.optimizer.lr = a.optimizer.lr;
    b.compare = {"baseline", "delayed"};
    d = first_difference(a, b);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->field, "compare");
    EXPECT_EQ(d->a, "[]");
    EXPECT_EQ(d->b, "[\"baseline\",\"delayed\"]");
}

TEST(TrainConfig, UnknownFieldsAreErrorsNamingThePath) {
    EXPECT_CONTAINS(json_error(R"({"model": {"dmodel": 64}})"), "run.json: unknown field 'model.dmodel'");
    EXPECT_CONTAINS(json_error(R"({"stepz": 10})"), "unknown field 'stepz'");
    EXPECT_CONTAINS(json_error(R"({"optimiser": {}})"), "unknown field 'optimiser'");
    EXPECT_CONTAINS(json_error(R"({"model": 5})"), "field 'model' must be an object, got 5");
}

TEST(TrainConfig, WrongTypesAndRangesNameFieldAndValue) {
    EXPECT_CONTAINS(json_error(R"({"model": {"d_model": "big"}})"),
                    "run.json: field 'model.d_model': expected an integer, got \"big\"");
    EXPECT_CONTAINS(json_error(R"({"steps": 2.5})"), "field 'steps': expected an integer, got 2.5");
    EXPECT_CONTAINS(json_error(R"({"steps": -1})"), "field 'steps': out of range");
    EXPECT_CONTAINS(json_error(R"({"optimizer": {"beta1": 1.0}})"), "field 'optimizer.beta1': out of range [0, 1)");
    EXPECT_CONTAINS(json_error(R"({"optimizer": {"lr": "fast"}})"), "field 'optimizer.lr': expected a number");
    EXPECT_CONTAINS(json_error(R"({"model": {"norm": "batchnorm"}})"),
                    "field 'model.norm': expected one of layernorm, rmsnorm, got \"batchnorm\"");
    EXPECT_CONTAINS(json_error(R"({"rewind": {"enabled": 1}})"), "field 'rewind.enabled': expected true or false");
    EXPECT_CONTAINS(json_error(R"({"seed": -3})"), "field 'seed': expected a non-negative integer, got -3");
    EXPECT_CONTAINS(json_error(R"({"compare": [1, 2]})"), "field 'compare': expected a list of names");
    EXPECT_CONTAINS(json_error(R"({"steps": 10,})"), "run.json: invalid JSON");
    EXPECT_CONTAINS(json_error(R"([1])"), "run.json: a config must be a JSON object");
}

TEST(TrainConfig, CrossFieldChecks) {
    EXPECT_CONTAINS(json_error(R"({"seq_len": 256, "model": {"max_seq": 128}})"),
                    "run.json: seq_len 256 exceeds model.max_seq 128");
    EXPECT_CONTAINS(json_error(R"({"recipe": "fp4"})"), "run.json: recipe: ");
    EXPECT_CONTAINS(json_error(R"({"recipe": "fp4"})"), "fp4");
    EXPECT_CONTAINS(json_error(R"({"compare": "baseline,fp4"})"), "compare: ");
    EXPECT_CONTAINS(json_error(R"({"optimizer": {"lr": 0.001}, "schedule": {"min_lr": 0.01}})"),
                    "schedule.min_lr 0.010000 exceeds optimizer.lr 0.001000");
    EXPECT_CONTAINS(json_error(R"({"model": {"vocab_size": 100}})"), "model.vocab_size 100 is too small");
    EXPECT_NE(json_error(R"({"model": {"d_model": 100, "n_head": 3}})"), "(no error)");  // the model's own check
}

TEST(TrainConfig, OverridesGoThroughTheSameValidation) {
    TrainConfig c;
    apply_override(c, "model.d_model=192");
    apply_override(c, "model.norm=rmsnorm");
    apply_override(c, "compare=baseline,delayed");
    apply_override(c, "data.source=text:my file.txt");
    apply_override(c, "rewind.enabled=false");
    apply_override(c, "optimizer.lr=1e-3");
    apply_override(c, "schedule.min_lr=1e-4");
    EXPECT_EQ(c.model.d_model, 192);
    EXPECT_EQ(c.model.norm, NormKind::RMSNorm);
    EXPECT_EQ(c.compare, (std::vector<std::string>{"baseline", "delayed"}));
    EXPECT_EQ(c.data.source, "text:my file.txt");
    EXPECT_FALSE(c.rewind.enabled);
    EXPECT_FLOAT_EQ(c.optimizer.lr, 1e-3f);

    EXPECT_CONTAINS(error_of([&] { apply_override(c, "model.dmodel=3"); }),
                    "--set model.dmodel=3: unknown field 'model.dmodel'");
    EXPECT_CONTAINS(error_of([&] { apply_override(c, "model.d_model=abc"); }),
                    "field 'model.d_model': expected an integer, got \"abc\"");
    EXPECT_CONTAINS(error_of([&] { apply_override(c, "steps"); }), "expected FIELD=VALUE");
    EXPECT_CONTAINS(error_of([&] { apply_override(c, "model.norm=groupnorm"); }), "groupnorm");
    EXPECT_EQ(c.model.d_model, 192);  // a failed override leaves the config as it was
}

TEST(TrainConfig, MissingFileIsNamed) {
    EXPECT_CONTAINS(error_of([] { load_train_config("/nonexistent/run.json"); }),
                    "/nonexistent/run.json: cannot open config file");
}

TEST(TrainConfig, ShippedConfigsLoad) {
    fs::path dir = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
        if (e.path().extension() != ".json") continue;
        EXPECT_NO_THROW(load_train_config(e.path().string())) << e.path();
        ++n;
    }
    EXPECT_GE(n, 3);
    EXPECT_EQ(train_config_to_json(load_train_config((dir / "default.json").string())),
              train_config_to_json(TrainConfig{}));  // default.json documents the defaults
}

TEST(TrainConfigOverride, SeveralAtOnceAreCheckedTogetherWhateverTheirOrder) {
    TrainConfig one_by_one;
    EXPECT_THROW(apply_override(one_by_one, "model.max_seq=32"), std::invalid_argument);  // seq_len 64 > 32

    TrainConfig c;
    apply_overrides(c, {"model.max_seq=32", "seq_len=32"});
    EXPECT_EQ(c.model.max_seq, 32);
    EXPECT_EQ(c.seq_len, 32);

    TrainConfig bad;
    try {
        apply_overrides(bad, {"model.max_seq=16", "model.d_model=64"});
        FAIL() << "seq_len 64 > max_seq 16 must be refused";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("exceeds model.max_seq 16"), std::string::npos) << e.what();
    }
    EXPECT_THROW(apply_overrides(bad, {"model.d_model=abc"}), std::invalid_argument);
}
