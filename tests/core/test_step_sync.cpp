// The step of a job of one (SingleProcess) and the control requests ranks send each other.
#include <gtest/gtest.h>

#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/control_request.h"
#include "engine/step_sync.h"
#include "support/error_of.h"

namespace fp8scope {
namespace {

TEST(ControlRequests, TravelAsTextAndBack) {
    const std::deque<ControlRequest> sent = {{ControlRequest::Switch, 1, "mxfp8", 0},
                                             {ControlRequest::Checkpoint, -1, "/tmp/a b.ckpt", 0},
                                             {ControlRequest::CaptureEvery, -1, "", 25},
                                             {ControlRequest::KernelSteps, -1, "", 40}};
    const std::string text = encode_requests(sent);
    EXPECT_EQ(text, "3 1 0 mxfp8\n4 -1 0 /tmp/a b.ckpt\n5 -1 25 \n6 -1 40 \n");
    const std::deque<ControlRequest> got = decode_requests(text, 2);
    ASSERT_EQ(got.size(), 4u);
    for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].kind, sent[i].kind);
        EXPECT_EQ(got[i].run, sent[i].run);
        EXPECT_EQ(got[i].text, sent[i].text);
        EXPECT_EQ(got[i].value, sent[i].value);
    }
    EXPECT_TRUE(decode_requests("", 2).empty());
}

// Rank 0 of an elastic job names the ranks it admits at the next step boundary: numbers
// of 1 or more in ascending order, nothing else.
TEST(ControlRequests, AnAdmitRequestCarriesRanksInOrder) {
    const std::deque<ControlRequest> got = decode_requests(encode_requests({{ControlRequest::Admit, -1, "2 5", 0}}), 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].kind, ControlRequest::Admit);
    EXPECT_EQ(parse_ranks(got[0].text), (std::vector<int>{2, 5}));
    for (const char* bad : {"", "0", "-1", "3 2", "2 2", "2 x", "2.5"}) {
        EXPECT_TRUE(parse_ranks(bad).empty()) << bad;
        EXPECT_THROW(decode_requests("7 -1 0 " + std::string(bad) + "\n", 1), std::runtime_error) << bad;
    }
}

TEST(ControlRequests, AnUnreadableLineIsNamed) {
    try {
        decode_requests("9 0 0 x\n", 2);  // past KernelSteps
        FAIL() << "a kind past CaptureEvery was read";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("'9 0 0 x'"), std::string::npos) << e.what();
    }
}

TEST(ControlRequests, ARequestNoRankZeroSendsIsRefusedWithItsField) {
    // Each line well formed but out of range for a job of two runs: the reason names the field.
    const std::pair<const char*, const char*> cases[] = {
        {"3 1000 0 mxfp8\n", "run 1000 is outside 0..1"},
        {"3 -1 0 mxfp8\n", "run -1 is outside 0..1"},
        {"3 0 0 nosuch\n", "nosuch"},
        {"5 -1 -3 \n", "capture interval -3 is negative"},
        {"6 -1 0 \n", "kernel records of 0 steps asked"},
        {"6 1 5 \n", "run 1 given, expected -1"},
        {"4 7 0 /tmp/a.ckpt\n", "run 7 given, expected -1"},
        {"4 -1 9 /tmp/a.ckpt\n", "value 9 given, expected 0"},
        {"0 -1 0 \n", "never travel"},
        {"2 -1 0 \n", "never travel"},
        {"4 -1 0\n", "no space before the text"},
        {"3 99999999999 0 mxfp8\n", "kind run value text"},
    };
    for (const auto& [line, why] : cases) {
        const std::string e = testing::error_of([&] { decode_requests(line, 2); });
        FP8SCOPE_EXPECT_CONTAINS(e, why);
        FP8SCOPE_EXPECT_CONTAINS(e, std::string(line).substr(0, std::string(line).size() - 1));
    }
    EXPECT_EQ(decode_requests("3 1 0 mxfp8\n", 2).at(0).run, 1);  // the last run is in range
}

// A switch to one of the config's custom recipes is one every rank knows: its book has it.
TEST(ControlRequests, SwitchToACustomRecipeOfTheJob) {
    const RecipeBook book({CustomRecipe{"nvfp4_bf16_last", "nvfp4", {{{"blocks.3.*"}, {}, "baseline"}}}});
    EXPECT_EQ(decode_requests("3 0 0 nvfp4_bf16_last\n", 2, book).at(0).text, "nvfp4_bf16_last");
    EXPECT_EQ(decode_requests("3 0 0 nvfp4:sr=0\n", 2, book).at(0).text, "nvfp4:sr=0");  // built-in variants too
    FP8SCOPE_EXPECT_CONTAINS(testing::error_of([] { decode_requests("3 0 0 nvfp4_bf16_last\n", 2); }),
                             "nvfp4_bf16_last");  // not a recipe of a job without it
}

TEST(SingleProcess, AppliesRequestsInTheOrderTheyCameAndExchangesNothing) {
    SingleProcess one;
    EXPECT_EQ(one.world_size(), 1);
    EXPECT_EQ(one.loss(0, 2.5f), 2.5f);
    EXPECT_EQ(one.mean({1.0, 3.0}), (std::vector<double>{1.0, 3.0}));
    // Requests taken at a step's end wait for the next step and come before later ones.
    const StepAgreement a = one.agree(1, 10.0, {{ControlRequest::Stop, -1, "", 0}});
    EXPECT_TRUE(a.ranks.empty() && a.health.empty() && a.refused.empty());
    const std::deque<ControlRequest> due = one.requests_due({{ControlRequest::Pause, -1, "", 0}});
    ASSERT_EQ(due.size(), 2u);
    EXPECT_EQ(due[0].kind, ControlRequest::Stop);
    EXPECT_EQ(due[1].kind, ControlRequest::Pause);
    EXPECT_TRUE(one.requests_due({}).empty());
    EXPECT_TRUE(one.writes_checkpoints());
}

}  // namespace
}  // namespace fp8scope
