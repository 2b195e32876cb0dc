// Protocol versions 4 and 5 differ only in Meta (5 added grad_dtype): a Meta of version 4
// is the version-5 body without that field and decodes with it empty; version 6 sends a
// Step's step time in milliseconds where 4 and 5 sent seconds. The engine answers a
// version-4 Hello in version 4 and refuses a version it does not speak, naming the ones
// it does; a client greets an engine of version 4, which refuses version 6, again in 4.
// A client older than version 10 gets a world_changed event as a health event.
#include <gtest/gtest.h>
#include <poll.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "live_client.h"
#include "live_server.h"
#include "live_test_util.h"
#include "raw_conn.h"

namespace fp8scope::live::test {
namespace {

using namespace std::chrono_literals;

trace::TraceMeta job_meta() {
    trace::TraceMeta m = sample_meta();
    m.rank = 0;
    m.world_size = 2;
    m.grad_dtype = "bf16";
    return m;
}

std::string body(const std::string& frame) { return frame.substr(wire::kHeader); }

TEST(LiveVersions, AVersion4MetaIsTheVersion5BodyWithoutTheGradientType) {
    const std::string v4 = body(wire::frame(wire::MetaMsg{4, job_meta()}));
    const std::string v5 = body(wire::frame(wire::MetaMsg{5, job_meta()}));
    // magic (8), version (4), the fields; version 5 appends grad_dtype (u32 length, "bf16").
    std::string v4_as_5 = v4;
    const std::uint32_t five = 5;
    std::memcpy(v4_as_5.data() + wire::kMagic.size(), &five, 4);
    const std::uint32_t len = 4;
    v4_as_5.append(reinterpret_cast<const char*>(&len), 4).append("bf16");
    EXPECT_EQ(v5, v4_as_5);

    const wire::MetaMsg old = wire::decode_meta(v4);
    EXPECT_EQ(old.version, 4u);
    EXPECT_EQ(old.meta.grad_dtype, "");
    EXPECT_EQ(old.meta.world_size, 2);
    EXPECT_EQ(old.meta.ops, job_meta().ops);
    const wire::MetaMsg now = wire::decode_meta(v5);
    EXPECT_EQ(now.version, 5u);
    EXPECT_EQ(now.meta.grad_dtype, "bf16");
    // A version-4 body that says version 5 lacks a field: refused, not misread.
    std::string short_v5 = v4;
    std::memcpy(short_v5.data() + wire::kMagic.size(), &five, 4);
    EXPECT_THROW(wire::decode_meta(short_v5), wire::WireError);
}

TEST(LiveVersions, ARankStepBeforeVersion9LacksTheFp8SumFigures) {
    const trace::RankStepRecord r = sample_rank_step(2, 1);  // a measured step
    ASSERT_EQ(r.grad_snr_db, 31.5);
    const std::string v8 = body(wire::frame(r, 8)), v9 = body(wire::frame(r, 9));
    std::string v8_as_9 = v8;
    for (double x : {r.grad_snr_db, r.grad_underflow_pct, r.grad_overflow_pct})
        v8_as_9.append(reinterpret_cast<const char*>(&x), sizeof x);
    EXPECT_EQ(v9, v8_as_9);
    const trace::RankStepRecord old = wire::decode_rank_step(v8, 8);
    EXPECT_EQ(old.grad_error, r.grad_error);
    EXPECT_TRUE(std::isnan(old.grad_snr_db));
    EXPECT_TRUE(std::isnan(old.grad_overflow_pct));
    expect_same(wire::decode_rank_step(v9, 9), r);
    EXPECT_THROW(wire::decode_rank_step(v8, 9), wire::WireError);  // a field short: refused, not misread

    // The engine sends a version-8 client the version-8 body.
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", job_meta(), nullptr);
    RawConn old_client(server.endpoint());
    ASSERT_TRUE(old_client.send(wire::frame(wire::Hello{8, ""})));
    server.publish(r);
    std::optional<RawConn::Got> got;
    while ((got = old_client.next()) && got->type != wire::Msg::RankStep) {}
    ASSERT_TRUE(got);
    EXPECT_EQ(got->body, v8);
}

TEST(LiveVersions, TheEngineAnswersAVersion4ClientInVersion4) {
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", job_meta(), nullptr);
    RawConn old(server.endpoint());
    ASSERT_TRUE(old.send(wire::frame(wire::Hello{4, ""})));
    auto meta = old.next();
    ASSERT_TRUE(meta);
    ASSERT_EQ(meta->type, wire::Msg::Meta);
    const wire::MetaMsg m = wire::decode_meta(meta->body);
    EXPECT_EQ(m.version, 4u);
    EXPECT_EQ(m.meta.grad_dtype, "");
    EXPECT_EQ(m.meta.world_size, 2);
    // The records that follow are the same in both versions.
    server.publish(sample_rank_step(1, 1));
    std::optional<RawConn::Got> got;
    while ((got = old.next()) && got->type != wire::Msg::RankStep) {}
    ASSERT_TRUE(got);
    expect_same(wire::decode_rank_step(got->body, 4), sample_rank_step(1, 1));
    // A current client in the same session gets the type.
    Collected now;
    LiveClient client(server.endpoint(), "", now.handlers());
    ASSERT_TRUE(now.wait([&] { return now.meta.size() == 1; }));
    EXPECT_EQ(now.meta[0].grad_dtype, "bf16");
}

// Kernel sums came with version 9: a client of version 8 is not sent them (its next
// frame is the rank record published after), a current one is, field for field.
TEST(LiveVersions, KernelSumsReachClientsOfVersion9Only) {
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", job_meta(), nullptr);
    RawConn old(server.endpoint());
    ASSERT_TRUE(old.send(wire::frame(wire::Hello{8, ""})));
    ASSERT_TRUE(old.next());  // Meta
    Collected now;
    LiveClient client(server.endpoint(), "", now.handlers());
    ASSERT_TRUE(now.wait([&] { return now.meta.size() == 1; }));
    const trace::KernelStepRecord sum{1, 7, 2, 0, trace::OpKind::Memcpy, 1, 3, 900, 100, 500, 4096};
    server.publish(sum);
    server.publish(sample_rank_step(7, 1));
    std::optional<RawConn::Got> got;
    while ((got = old.next()) && got->type != wire::Msg::RankStep) EXPECT_NE(got->type, wire::Msg::KernelStep);
    ASSERT_TRUE(got);
    ASSERT_TRUE(now.wait([&] { return now.kernel_steps.size() == 1; }));
    expect_same(now.kernel_steps[0], sum);
}

// The world_changed event kind came with version 10: a client of version 9 gets it as a
// health event with the same step and detail, a current one as it is.
TEST(LiveVersions, AWorldChangeReachesAVersion9ClientAsAHealthEvent) {
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", job_meta(), nullptr);
    RawConn old(server.endpoint());
    ASSERT_TRUE(old.send(wire::frame(wire::Hello{9, ""})));
    ASSERT_TRUE(old.next());  // Meta
    Collected now;
    LiveClient client(server.endpoint(), "", now.handlers());
    ASSERT_TRUE(now.wait([&] { return now.meta.size() == 1; }));
    const trace::EventRecord change{-1, 8, trace::EventKind::WorldChanged,
                                    "lost rank 2; world 4 -> 3; failed in step 10, restored step 8 (2 steps lost)"};
    server.publish(change);
    std::optional<RawConn::Got> got;
    while ((got = old.next()) && got->type != wire::Msg::Event) {}
    ASSERT_TRUE(got);
    const trace::EventRecord seen = wire::decode_event(got->body);
    EXPECT_EQ(seen.kind, trace::EventKind::Health);
    EXPECT_EQ(seen.step, 8);
    EXPECT_EQ(seen.detail, change.detail);
    ASSERT_TRUE(now.wait([&] { return now.events.size() == 1; }));
    EXPECT_EQ(now.events[0].kind, trace::EventKind::WorldChanged);
    EXPECT_EQ(now.events[0].detail, change.detail);
}

TEST(LiveVersions, AVersionTheEngineDoesNotSpeakIsRefusedNamingItsOwn) {
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", job_meta(), nullptr);
    for (const std::uint32_t version : {3u, wire::kVersion + 1}) {
        RawConn c(server.endpoint());
        ASSERT_TRUE(c.send(wire::frame(wire::Hello{version, ""})));
        auto e = c.next_error();
        ASSERT_TRUE(e) << version;
        EXPECT_EQ(e->code, wire::ErrorCode::BadVersion);
        EXPECT_EQ(e->message, "protocol version " + std::to_string(version) + " not supported; this engine speaks 4 to " +
                                    std::to_string(wire::kVersion));
        EXPECT_TRUE(c.closes_within(5s));
    }
}

// An engine of version 4 as it answered: BadVersion to any other Hello, then closing; a
// Meta of version 4 and a rank record to a version-4 Hello.
TEST(LiveVersions, AClientGreetsAVersion4EngineAgainInVersion4) {
    TempDir dir;
    Endpoint e = parse_endpoint("unix:" + (dir / "old.sock"));
    net::Fd listener = net::listen_on(e);
    std::vector<std::uint32_t> hellos;
    std::thread engine([&] {
        for (int i = 0; i < 2; ++i) {
            pollfd p{listener.get(), POLLIN, 0};
            if (::poll(&p, 1, 5000) <= 0) return;
            RawConn c(net::Fd(net::accept_one(listener.get())));
            auto hello = c.next();
            if (!hello || hello->type != wire::Msg::Hello) return;
            hellos.push_back(wire::decode_hello(hello->body).version);
            if (hellos.back() != 4) {
                c.send(wire::frame(wire::ErrorMsg{wire::ErrorCode::BadVersion,
                                                  "protocol version " + std::to_string(hellos.back()) +
                                                      " not supported; this engine speaks 4"}));
                continue;
            }
            c.send(wire::frame(wire::MetaMsg{4, job_meta()}));
            c.send(wire::frame(sample_rank_step(3, 1), 4));
            trace::StepRecord step = sample_step(0, 2);
            step.step_ms = 0.25;  // what a version-4 engine sent: the step time in seconds
            c.send(wire::frame(step));
            c.closes_within(5s);  // until the client leaves
        }
    });
    {
        Collected got;
        LiveClient client(e, "", got.handlers());
        ASSERT_TRUE(got.wait([&] { return got.rank_steps.size() == 1 && got.steps.size() == 1; }));
        EXPECT_EQ(got.steps[0].step_ms, 250.0);
        ASSERT_EQ(got.meta.size(), 1u);
        EXPECT_EQ(got.meta[0].world_size, 2);
        EXPECT_EQ(got.meta[0].grad_dtype, "");  // version 4 does not carry it
        expect_same(got.rank_steps[0], sample_rank_step(3, 1));
    }
    engine.join();
    EXPECT_EQ(hellos, (std::vector<std::uint32_t>{wire::kVersion, 4}));
}

// Versions before 6 read a Step's step time in seconds: a client of version 5 gets it so,
// from the history and live, while a current client in the same session gets milliseconds.
TEST(LiveVersions, AVersion5ClientGetsTheStepTimeInSeconds) {
    TempDir dir;
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", job_meta(), nullptr);
    trace::StepRecord early = sample_step(0, 1), late = sample_step(0, 2);
    early.step_ms = 250.0;
    late.step_ms = 125.0;
    server.publish(early);
    RawConn old(server.endpoint());
    ASSERT_TRUE(old.send(wire::frame(wire::Hello{5, ""})));
    Collected now;
    LiveClient client(server.endpoint(), "", now.handlers());
    ASSERT_TRUE(now.wait([&] { return now.steps.size() == 1; }));
    server.publish(late);
    std::vector<double> seconds;
    for (std::optional<RawConn::Got> got; seconds.size() < 2 && (got = old.next());)
        if (got->type == wire::Msg::Step) seconds.push_back(wire::decode_step(got->body).step_ms);
    EXPECT_EQ(seconds, (std::vector<double>{0.25, 0.125}));
    ASSERT_TRUE(now.wait([&] { return now.steps.size() == 2; }));
    EXPECT_EQ(now.steps[0].step_ms, 250.0);
    EXPECT_EQ(now.steps[1].step_ms, 125.0);
}

}  // namespace
}  // namespace fp8scope::live::test
