// Hostile configs (issue 13, defects 3, 4 and 13): nesting that overflowed the stack
// while the error printed the value, duplicate keys, a number out of double range whose
// message lacked the file name, and a non-UTF-8 path that aborted the JSON writer.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/train_config.h"
#include "util/json_input.h"
#include "support/error_of.h"

using namespace fp8scope;
using fp8scope::testing::error_of;

namespace {

std::string nested(std::size_t depth, const std::string& inside = "1") {
    return std::string(depth, '[') + inside + std::string(depth, ']');
}

}  // namespace

TEST(ConfigHardening, DeepNestingIsRefusedWithABoundedMessage) {
    // 400 KB of brackets: the parse stops at the depth limit, the message stays short.
    const std::string m = error_of([] { train_config_from_json("{\"compare\": " + nested(200000) + "}", "run.json"); });
    FP8SCOPE_EXPECT_CONTAINS(m, "run.json: invalid JSON: nested deeper than 64 levels");
    EXPECT_LT(m.size(), 200u) << m;
}

TEST(ConfigHardening, AWrongValueIsQuotedBoundedWhateverItsSize) {
    // Within the depth limit but large: the message quotes a few dozen characters.
    const std::string m = error_of([] { train_config_from_json("{\"compare\": [" + nested(60) + "]}", "run.json"); });
    FP8SCOPE_EXPECT_CONTAINS(m, "run.json: field 'compare': expected a list of names, got [[[[...]]]]");
    const std::string wide = "{\"steps\": [" + std::string(100000, '1') + "]}";
    const std::string m2 = error_of([&] { train_config_from_json(wide, "run.json"); });
    EXPECT_LT(m2.size(), 200u) << m2.substr(0, 300);
    const std::string m3 = error_of([] {
        TrainConfig c;
        apply_override(c, "compare=" + nested(100000));
    });
    EXPECT_LT(m3.size(), 300u) << m3.substr(0, 300);
}

TEST(ConfigHardening, DuplicateKeysAreRefusedNamingTheKey) {
    FP8SCOPE_EXPECT_CONTAINS(error_of([] { train_config_from_json(R"({"steps": 1, "steps": 2})", "run.json"); }),
                    "run.json: invalid JSON: duplicate key \"steps\"");
    FP8SCOPE_EXPECT_CONTAINS(error_of([] { train_config_from_json(R"({"model": {"n_layer": 1, "n_layer": 2}})", "run.json"); }),
                    "duplicate key \"n_layer\"");
    // The same key in two objects is no duplicate.
    EXPECT_NO_THROW(train_config_from_json(R"({"model": {"n_layer": 2}, "rewind": {"window": 4}, "steps": 3})"));
}

TEST(ConfigHardening, ANumberPastDoubleRangeNamesTheFile) {
    FP8SCOPE_EXPECT_CONTAINS(error_of([] { train_config_from_json(R"({"optimizer": {"lr": 1e400}})", "run.json"); }),
                    "run.json: invalid JSON: ");
}

TEST(ConfigHardening, NonUtf8PathsPrintInsteadOfAborting) {
    TrainConfig c;
    c.checkpoint.dir = "ckpt-\xff\xfe";
    const std::string text = train_config_to_json(c);  // threw type_error 316 -> terminate
    FP8SCOPE_EXPECT_CONTAINS(text, "ckpt-\xEF\xBF\xBD\xEF\xBF\xBD");
    // An override keeps the bytes as they are (no dump and re-parse on the way).
    apply_override(c, "checkpoint.every=5");
    EXPECT_EQ(c.checkpoint.dir, "ckpt-\xff\xfe");
}

TEST(JsonInput, ShowIsBoundedAndDumpReplaces) {
    nlohmann::json deep = nlohmann::json::parse(nested(50));
    EXPECT_EQ(show_json(deep), "[[[[...]]]]");
    nlohmann::json big = nlohmann::json::array();
    for (int i = 0; i < 100000; ++i) big.push_back(i);
    EXPECT_LE(show_json(big).size(), 60u);
    EXPECT_EQ(dump_json(nlohmann::json("a\xff")), "\"a\xEF\xBF\xBD\"");
    EXPECT_THROW(parse_json(nested(65)), JsonInputError);
    EXPECT_NO_THROW(parse_json(nested(64)));
}
