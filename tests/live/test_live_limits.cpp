// The live server against long runs and hostile local processes (issue 13, defects 11,
// 12 and 13): the history a late client replays is bounded and says where the rest is;
// connections that never authenticate cannot lock authorised clients out; a pause whose
// client disconnected is lifted, with a reason the trainer puts in its Resume event.
#include <gtest/gtest.h>

#include <mutex>

#include "live_server.h"
#include "live_test_util.h"
#include "raw_conn.h"

namespace fp8scope::live::test {
namespace {

using namespace std::chrono_literals;

struct Server {
    Server() : server(parse_endpoint("unix:" + (dir / "engine.sock")), "", sample_meta(), handler.fn()) {}
    TempDir dir;
    FakeHandler handler;
    LiveServer server;
};

TEST(LiveLimits, ALateClientGetsTheLastStepsAndWhereTheRestIs) {
    Server s;
    s.server.publish(trace::EventRecord{-1, 0, trace::EventKind::Start, "trace file /runs/long.h5"});
    for (std::int64_t step = 1; step <= 2500; ++step) s.server.publish(sample_step(0, step));
    s.server.publish(sample_event(0, 2500, trace::EventKind::Checkpoint));

    Collected got;
    LiveClient late(s.server.endpoint(), "", got.handlers());
    ASSERT_TRUE(got.wait([&] { return got.events.size() == 2 && got.steps.size() == 1000; }));
    std::this_thread::sleep_for(50ms);
    std::lock_guard lock(got.mu);
    EXPECT_EQ(got.steps.size(), 1000u);
    EXPECT_EQ(got.steps.front().step, 1501);
    EXPECT_EQ(got.steps.back().step, 2500);
    EXPECT_EQ(got.events[0].kind, trace::EventKind::Start);
    EXPECT_NE(got.events[0].detail.find("starts at step 1501"), std::string::npos) << got.events[0].detail;
    EXPECT_NE(got.events[0].detail.find("earlier steps are in the trace file /runs/long.h5"), std::string::npos)
        << got.events[0].detail;
    EXPECT_EQ(got.events[1].kind, trace::EventKind::Checkpoint);
}

TEST(LiveLimits, WithoutATraceFileTheLateClientIsToldTheStepsAreGone) {
    Server s;
    s.server.publish(trace::EventRecord{-1, 0, trace::EventKind::Start, ""});
    for (std::int64_t step = 1; step <= 1200; ++step) s.server.publish(sample_step(0, step));
    Collected got;
    LiveClient late(s.server.endpoint(), "", got.handlers());
    ASSERT_TRUE(got.wait([&] { return got.events.size() == 1 && got.steps.size() == 1000; }));
    EXPECT_NE(got.events[0].detail.find("earlier steps are not kept (no trace file)"), std::string::npos)
        << got.events[0].detail;
}

TEST(LiveLimits, UnauthenticatedConnectionsDoNotCountAgainstTheCap) {
    Server s;
    std::vector<std::unique_ptr<RawConn>> idle;
    for (int i = 0; i < 40; ++i) idle.push_back(std::make_unique<RawConn>(s.server.endpoint()));
    Collected got;
    LiveClient authorised(s.server.endpoint(), "", got.handlers());  // was "too many clients"
    ASSERT_TRUE(got.wait([&] { return got.meta.size() == 1; }));
    EXPECT_EQ(s.server.clients(), 1);
}

TEST(LiveLimits, TheCapCountsAuthenticatedClients) {
    Server s;
    std::vector<std::unique_ptr<LiveClient>> clients;
    for (int i = 0; i < 32; ++i) clients.push_back(std::make_unique<LiveClient>(s.server.endpoint(), "", ClientHandlers{}));
    ASSERT_TRUE(eventually([&] { return s.server.clients() == 32; }));
    RawConn extra(s.server.endpoint());
    extra.hello("");
    auto e = extra.next_error();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code, wire::ErrorCode::TooManyClients);
    EXPECT_NE(e->message.find("too many clients (32"), std::string::npos) << e->message;
}

TEST(LiveLimits, APauseIsLiftedWhenTheClientThatPausedLeaves) {
    Server s;
    {
        LiveClient pauser(s.server.endpoint(), "", {});
        ASSERT_TRUE(pauser.send({CommandKind::Pause, -1, "", 0}).ok);
    }
    ASSERT_TRUE(eventually([&] { return s.handler.commands().size() == 2; }));
    const Command resume = s.handler.commands()[1];
    EXPECT_EQ(resume.kind, CommandKind::Resume);
    EXPECT_NE(resume.reason.find("the client that paused the run disconnected"), std::string::npos) << resume.reason;
}

TEST(LiveLimits, APauseStaysWhileAnotherPausingClientRemainsOrOnceResumed) {
    Server s;
    LiveClient stays(s.server.endpoint(), "", {});
    ASSERT_TRUE(stays.send({CommandKind::Pause, -1, "", 0}).ok);
    {
        LiveClient leaves(s.server.endpoint(), "", {});
        ASSERT_TRUE(leaves.send({CommandKind::Pause, -1, "", 0}).ok);
    }
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(s.handler.commands().size(), 2u) << "a pausing client is still attached";
    {
        LiveClient other(s.server.endpoint(), "", {});
        ASSERT_TRUE(other.send({CommandKind::Resume, -1, "", 0}).ok);
    }
    stays.close();
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(s.handler.commands().size(), 3u) << "the run was resumed already: nothing to lift";
}

}  // namespace
}  // namespace fp8scope::live::test
