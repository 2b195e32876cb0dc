// The step of a job of one (SingleProcess) and the control requests ranks send each other.
#include <gtest/gtest.h>

#include <deque>
#include <stdexcept>
#include <string>

#include "engine/control_request.h"
#include "engine/step_sync.h"

namespace fp8scope {
namespace {

TEST(ControlRequests, TravelAsTextAndBack) {
    const std::deque<ControlRequest> sent = {{ControlRequest::Switch, 1, "mxfp8", 0},
                                             {ControlRequest::Checkpoint, -1, "/tmp/a b.ckpt", 0},
                                             {ControlRequest::CaptureEvery, -1, "", 25}};
    const std::string text = encode_requests(sent);
    EXPECT_EQ(text, "3 1 0 mxfp8\n4 -1 0 /tmp/a b.ckpt\n5 -1 25 \n");
    const std::deque<ControlRequest> got = decode_requests(text);
    ASSERT_EQ(got.size(), 3u);
    for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].kind, sent[i].kind);
        EXPECT_EQ(got[i].run, sent[i].run);
        EXPECT_EQ(got[i].text, sent[i].text);
        EXPECT_EQ(got[i].value, sent[i].value);
    }
    EXPECT_TRUE(decode_requests("").empty());
}

TEST(ControlRequests, AnUnreadableLineIsNamed) {
    try {
        decode_requests("9 0 0 x\n");
        FAIL() << "a kind past CaptureEvery was read";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("'9 0 0 x'"), std::string::npos) << e.what();
    }
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
