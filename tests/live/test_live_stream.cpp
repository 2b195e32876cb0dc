// The live stream end to end over real sockets: records and metadata arrive field by
// field, a late client gets the history, commands reach the handler over both socket
// kinds, and a bad token, garbage, oversized frames or a client that stops reading are
// dealt with while other clients go on being served.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <mutex>

#include "live_server.h"
#include "live_test_util.h"
#include "raw_conn.h"

namespace fp8scope::live::test {
namespace {

using namespace std::chrono_literals;

// An operand of the sample records (the delayed run's dgrad dy) and an event.
trace::OperandKey key(std::int64_t step, std::int32_t linear = 1) {
    return {1, step, linear, Gemm::Dgrad, Operand::DY};
}
trace::EventRecord event(std::int64_t step) { return sample_event(1, step, trace::EventKind::RecipeSwitch); }

struct Fixture {
    explicit Fixture(bool tcp, std::string token = "") {
        Endpoint e = tcp ? parse_endpoint("tcp:127.0.0.1:0") : parse_endpoint("unix:" + (dir / "engine.sock"));
        if (tcp && token.empty()) token = "tok-123";
        server = std::make_unique<LiveServer>(e, token, sample_meta(), handler.fn());
    }
    TempDir dir;
    FakeHandler handler;
    std::unique_ptr<LiveServer> server;
};

class LiveStream : public ::testing::TestWithParam<bool> {};  // true: TCP

TEST_P(LiveStream, EveryRecordArrivesFieldByField) {
    Fixture fx(GetParam());
    Collected got;
    LiveClient client(fx.server->endpoint(), fx.server->token(), got.handlers());
    ASSERT_TRUE(eventually([&] { return fx.server->clients() == 1; }));
    ASSERT_TRUE(got.wait([&] { return got.meta.size() == 1; }));
    expect_same(got.meta[0], sample_meta());

    const auto meta = sample_meta();
    for (int s = 1; s <= 3; ++s) fx.server->publish(sample_step(s % 2, s));
    fx.server->publish(event(3));
    fx.server->publish(sample_scaling(meta, 1, 3));
    fx.server->publish(sample_operand(meta, key(3)));
    fx.server->publish(sample_blockmap(key(3), 2));
    fx.server->publish(sample_op(1, 3, 3));
    ASSERT_TRUE(got.wait([&] { return got.ops.size() == 1; }));

    ASSERT_EQ(got.steps.size(), 3u);
    for (int s = 1; s <= 3; ++s) expect_same(got.steps[s - 1], sample_step(s % 2, s));
    ASSERT_EQ(got.events.size(), 1u);
    expect_same(got.events[0], event(3));
    ASSERT_EQ(got.scaling.size(), 1u);
    expect_same(got.scaling[0], sample_scaling(meta, 1, 3));
    ASSERT_EQ(got.operands.size(), 1u);
    expect_same(got.operands[0], sample_operand(meta, key(3)));
    ASSERT_EQ(got.blockmaps.size(), 1u);
    expect_same(got.blockmaps[0], sample_blockmap(key(3), 2));
    expect_same(got.ops[0], sample_op(1, 3, 3));
    EXPECT_EQ(got.meta.size(), 1u);
}

TEST_P(LiveStream, LateClientGetsMetaHistoryAndNewestOperands) {
    Fixture fx(GetParam());
    const auto meta = sample_meta();
    for (int s = 1; s <= 20; ++s) fx.server->publish(sample_step(0, s));
    fx.server->publish(event(5));
    fx.server->publish(sample_operand(meta, key(10, 0)));
    fx.server->publish(sample_operand(meta, key(20, 0)));
    fx.server->publish(sample_operand(meta, key(20, 1)));
    fx.server->publish(sample_scaling(meta, 1, 20));  // not history: only live clients see it
    fx.server->publish(sample_op(1, 20, 3));

    Collected got;
    LiveClient client(fx.server->endpoint(), fx.server->token(), got.handlers());
    ASSERT_TRUE(got.wait([&] { return got.steps.size() == 20 && got.operands.size() == 2 && got.events.size() == 1; }));
    expect_same(got.meta.at(0), sample_meta());
    for (int s = 1; s <= 20; ++s) expect_same(got.steps[s - 1], sample_step(0, s));
    expect_same(got.events[0], event(5));
    expect_same(got.operands[0], sample_operand(meta, key(20, 0)));
    expect_same(got.operands[1], sample_operand(meta, key(20, 1)));

    fx.server->publish(sample_step(0, 21));
    ASSERT_TRUE(got.wait([&] { return got.steps.size() == 21; }));
    expect_same(got.steps[20], sample_step(0, 21));
    std::this_thread::sleep_for(50ms);
    std::lock_guard lock(got.mu);
    EXPECT_EQ(got.steps.size(), 21u);  // nothing repeated
    EXPECT_TRUE(got.scaling.empty());
    EXPECT_TRUE(got.ops.empty());
}

// A data-parallel run: every rank's share of a step reaches a client that is there and,
// kept with the step records, one that connects later; the meta says which rank serves
// and the type the gradient sums travel in.
TEST_P(LiveStream, RankRecordsArriveAndALateClientGetsThem) {
    Fixture fx(GetParam());
    trace::TraceMeta job = sample_meta();
    job.world_size = 2;
    job.grad_dtype = "e4m3";
    Endpoint e = GetParam() ? parse_endpoint("tcp:127.0.0.1:0") : parse_endpoint("unix:" + (fx.dir / "job.sock"));
    LiveServer server(e, GetParam() ? "tok-123" : "", job, fx.handler.fn());
    Collected early;
    LiveClient first(server.endpoint(), server.token(), early.handlers());
    ASSERT_TRUE(eventually([&] { return server.clients() == 1; }));
    for (int s = 1; s <= 3; ++s) {
        server.publish(sample_step(0, s));
        for (int rank = 0; rank < 2; ++rank) server.publish(sample_rank_step(s, rank));
    }
    ASSERT_TRUE(early.wait([&] { return early.rank_steps.size() == 6; }));
    for (int i = 0; i < 6; ++i) expect_same(early.rank_steps[i], sample_rank_step(1 + i / 2, i % 2));
    EXPECT_EQ(early.meta.at(0).world_size, 2);
    EXPECT_EQ(early.meta.at(0).grad_dtype, "e4m3");

    Collected late;
    LiveClient second(server.endpoint(), server.token(), late.handlers());
    ASSERT_TRUE(late.wait([&] { return late.rank_steps.size() == 6 && late.steps.size() == 3; }));
    for (int i = 0; i < 6; ++i) expect_same(late.rank_steps[i], sample_rank_step(1 + i / 2, i % 2));
    expect_same(late.meta.at(0), job);
}

TEST_P(LiveStream, CommandsReachTheHandlerAndRepliesComeBack) {
    Fixture fx(GetParam());
    Collected got;
    LiveClient client(fx.server->endpoint(), fx.server->token(), got.handlers());
    std::vector<Command> sent = {{CommandKind::Pause, -1, "", 0},
                                 {CommandKind::Resume, -1, "", 0},
                                 {CommandKind::SwitchRecipe, 1, "blockwise", 0},
                                 {CommandKind::SetCaptureEvery, -1, "", 25},
                                 {CommandKind::Checkpoint, -1, "", 0},
                                 {CommandKind::RecordKernels, -1, "", 20},
                                 {CommandKind::Stop, -1, "", 0}};
    for (const auto& c : sent) {
        CommandReply r = client.send(c);
        EXPECT_TRUE(r.ok) << r.error;
        EXPECT_EQ(r.error, "");
    }
    CommandReply refused = client.send({CommandKind::SwitchRecipe, 0, "bogus", 0});
    EXPECT_FALSE(refused.ok);
    EXPECT_EQ(refused.error, "unknown recipe 'bogus'");

    auto seen = fx.handler.commands();
    ASSERT_EQ(seen.size(), sent.size() + 1);
    for (std::size_t i = 0; i < sent.size(); ++i) {
        EXPECT_EQ(seen[i].kind, sent[i].kind);
        EXPECT_EQ(seen[i].run, sent[i].run);
        EXPECT_EQ(seen[i].recipe, sent[i].recipe);
        EXPECT_EQ(seen[i].value, sent[i].value);
    }
}

TEST_P(LiveStream, WrongTokenIsRefusedWithAMessage) {
    Fixture fx(GetParam(), "right-token");
    try {
        LiveClient client(fx.server->endpoint(), "wrong-token", {});
        FAIL() << "connected with a wrong token";
    } catch (const LiveError& e) {
        EXPECT_NE(std::string(e.what()).find("wrong token"), std::string::npos) << e.what();
    }
    EXPECT_EQ(fx.server->clients(), 0);
    Collected got;
    LiveClient client(fx.server->endpoint(), "right-token", got.handlers());
    EXPECT_TRUE(got.wait([&] { return got.meta.size() == 1; }));
}

TEST_P(LiveStream, GarbageGetsErrorsAndOthersAreStillServed) {
    Fixture fx(GetParam());
    Collected got;
    LiveClient good(fx.server->endpoint(), fx.server->token(), got.handlers());

    RawConn bad(fx.server->endpoint());
    bad.hello(fx.server->token());
    ASSERT_EQ(bad.next()->type, wire::Msg::Meta);
    // An unknown type, then a command whose body is cut short: errors, nothing runs.
    std::string unknown = wire::frame(sample_step(0, 1));
    unknown[4] = static_cast<char>(200);
    ASSERT_TRUE(bad.send(unknown));
    auto e1 = bad.next_error();
    ASSERT_TRUE(e1);
    EXPECT_EQ(e1->code, wire::ErrorCode::UnknownType);
    std::string cut = wire::frame(wire::CommandMsg{1, {CommandKind::Stop, -1, "", 0}});
    cut.resize(cut.size() - 3);
    const std::uint32_t len = static_cast<std::uint32_t>(cut.size() - 4);
    std::memcpy(cut.data(), &len, 4);
    ASSERT_TRUE(bad.send(cut));
    auto e2 = bad.next_error();
    ASSERT_TRUE(e2);
    EXPECT_EQ(e2->code, wire::ErrorCode::Malformed);
    EXPECT_TRUE(fx.handler.commands().empty());

    // A third strike closes that connection only.
    ASSERT_TRUE(bad.send(unknown));
    EXPECT_TRUE(bad.next_error());
    EXPECT_TRUE(bad.closes_within(5s));

    fx.server->publish(sample_step(0, 1));
    ASSERT_TRUE(got.wait([&] { return got.steps.size() == 1; }));
    EXPECT_TRUE(good.send({CommandKind::Pause, -1, "", 0}).ok);
    EXPECT_EQ(fx.handler.commands().size(), 1u);
}

TEST_P(LiveStream, OversizedLengthGetsAnErrorAndOthersAreStillServed) {
    Fixture fx(GetParam());
    Collected got;
    LiveClient good(fx.server->endpoint(), fx.server->token(), got.handlers());

    for (bool after_hello : {false, true}) {
        RawConn bad(fx.server->endpoint());
        if (after_hello) {
            bad.hello(fx.server->token());
            ASSERT_EQ(bad.next()->type, wire::Msg::Meta);
        }
        std::string header(5, '\x03');
        const std::uint32_t over = wire::kMaxFrame + 1;
        std::memcpy(header.data(), &over, 4);
        ASSERT_TRUE(bad.send(header));
        auto e = bad.next_error();
        ASSERT_TRUE(e) << after_hello;
        EXPECT_EQ(e->code, wire::ErrorCode::FrameTooLarge);
        EXPECT_TRUE(bad.closes_within(5s));
    }
    fx.server->publish(sample_step(0, 2));
    ASSERT_TRUE(got.wait([&] { return got.steps.size() == 1; }));
    EXPECT_TRUE(good.send({CommandKind::Resume, -1, "", 0}).ok);
    EXPECT_EQ(fx.server->clients(), 1);
}

TEST_P(LiveStream, ClientThatStopsReadingIsDroppedWithoutBlockingPublish) {
    Fixture fx(GetParam());
    RawConn stalled(fx.server->endpoint());
    stalled.hello(fx.server->token());
    ASSERT_TRUE(eventually([&] { return fx.server->clients() == 1; }));

    // 40 block maps of 4 MiB each: far past the socket buffers and the 64 MiB queue.
    auto big = sample_blockmap(key(1), 2, 1 << 19);  // 2 x 2^19 tiles
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) fx.server->publish(big);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, 5s);
    EXPECT_TRUE(eventually([&] { return fx.server->clients() == 0; }));
    EXPECT_TRUE(stalled.closes_within(10s));

    Collected got;
    LiveClient fresh(fx.server->endpoint(), fx.server->token(), got.handlers());
    fx.server->publish(sample_step(0, 7));
    ASSERT_TRUE(got.wait([&] { return got.steps.size() == 1; }));
    expect_same(got.steps[0], sample_step(0, 7));
}

TEST_P(LiveStream, ClientIsToldWhenTheEngineGoesAway) {
    Fixture fx(GetParam());
    Collected got;
    LiveClient client(fx.server->endpoint(), fx.server->token(), got.handlers());
    ASSERT_TRUE(got.wait([&] { return got.meta.size() == 1; }));
    EXPECT_TRUE(client.connected());
    fx.server.reset();
    ASSERT_TRUE(got.wait([&] { return got.closed.size() == 1; }));
    EXPECT_EQ(got.closed[0], "the engine closed the connection");
    EXPECT_TRUE(eventually([&] { return !client.connected(); }));
    CommandReply r = client.send({CommandKind::Pause, -1, "", 0}, 500ms);
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "not connected");
}

INSTANTIATE_TEST_SUITE_P(Sockets, LiveStream, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Tcp" : "Unix"; });

TEST(LiveServerSetup, LocalSocketIsPrivateAndRemovedOnShutdown) {
    TempDir dir;
    const std::string path = dir / "engine.sock";
    {
        LiveServer server(parse_endpoint("unix:" + path), "", sample_meta(), nullptr);
        struct stat st {};
        ASSERT_EQ(::stat(path.c_str(), &st), 0);
        EXPECT_TRUE(S_ISSOCK(st.st_mode));
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        EXPECT_THROW(LiveServer(parse_endpoint("unix:" + path), "", sample_meta(), nullptr), LiveError);
    }
    struct stat st {};
    EXPECT_NE(::stat(path.c_str(), &st), 0);
}

TEST(LiveServerSetup, TcpNeedsATokenAndBindsLoopbackByDefault) {
    EXPECT_THROW(LiveServer(parse_endpoint("tcp:0"), "", sample_meta(), nullptr), LiveError);
    LiveServer server(parse_endpoint("tcp:0"), "t", sample_meta(), nullptr);
    EXPECT_EQ(server.endpoint().host, "127.0.0.1");
    EXPECT_GT(server.endpoint().port, 0);
}

TEST(LiveServerSetup, CommandsWithoutAHandlerAreRefused) {
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "e.sock")), "", sample_meta(), nullptr);
    LiveClient client(server.endpoint(), "", {});
    CommandReply r = client.send({CommandKind::Pause, -1, "", 0});
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error, "this engine takes no commands");
}

TEST(LiveClientErrors, NobodyListeningIsConnectionRefused) {
    TempDir dir;
    Endpoint e = parse_endpoint("unix:" + (dir / "none.sock"));
    try {
        LiveClient c(e, "", {});
        FAIL();
    } catch (const LiveError& err) {
        EXPECT_EQ(std::string(err.what()).rfind("connection refused: " + e.to_string(), 0), 0u) << err.what();
    }
    // A TCP port that was free a moment ago.
    Endpoint t;
    { LiveServer s(parse_endpoint("tcp:0"), "t", sample_meta(), nullptr); t = s.endpoint(); }
    try {
        LiveClient c(t, "t", {});
        FAIL();
    } catch (const LiveError& err) {
        EXPECT_EQ(std::string(err.what()), "connection refused: " + t.to_string());
    }
}

// A listener that answers like some other service, or not at all.
TEST(LiveClientErrors, SomethingElseIsNotAnFp8scopeEngine) {
    TempDir dir;
    Endpoint e = parse_endpoint("unix:" + (dir / "other.sock"));
    net::Fd listener = net::listen_on(e);
    std::thread other([&] {
        pollfd p{listener.get(), POLLIN, 0};
        if (::poll(&p, 1, 5000) <= 0) return;
        net::Fd c(net::accept_one(listener.get()));
        net::send_all(c.get(), "HTTP/1.1 400 Bad Request\r\n\r\n", 1s);
        std::this_thread::sleep_for(200ms);
    });
    try {
        LiveClient c(e, "", {});
        ADD_FAILURE();
    } catch (const LiveError& err) {
        EXPECT_EQ(std::string(err.what()).rfind("not an fp8scope engine: " + e.to_string(), 0), 0u) << err.what();
    }
    other.join();
}

}  // namespace
}  // namespace fp8scope::live::test
