// The live stream over loopback: meta and records reach a client unchanged, commands
// reach the handler over Unix and TCP sockets, wrong tokens and garbage frames are
// answered with errors and change nothing, a client that does not read is dropped
// without stalling the writer. Every wait is bounded.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstring>
#include <mutex>
#include <thread>

#include "live_client.h"
#include "live_server.h"
#include "trace_fixture.h"

namespace fp8scope::trace::live {
namespace {
using namespace testing;
using namespace std::chrono_literals;

// A command map with an unknown name, encoded without the project's encoder.
std::vector<std::uint8_t> json_free_command(const std::string& name) {
    std::vector<std::uint8_t> p = {0x81, 0xa3, 'c', 'm', 'd', static_cast<std::uint8_t>(0xa0 | name.size())};
    for (char ch : name) p.push_back(static_cast<std::uint8_t>(ch));
    return p;
}

ServerOptions listen_on(const std::string& spec, const std::string& token = "", std::size_t queue = 64u << 20) {
    ServerOptions o;
    o.listen = spec;
    o.token = token;
    o.client_queue_bytes = queue;
    return o;
}

struct Handled {
    std::mutex mu;
    std::vector<Command> commands;
    CommandHandler handler() {
        return [this](const Command& c) {
            if (c.kind == Command::Kind::SwitchRecipe && c.recipe == "nonsense")
                throw std::invalid_argument("unknown training recipe 'nonsense'");
            std::lock_guard lock(mu);
            commands.push_back(c);
        };
    }
    std::size_t size() {
        std::lock_guard lock(mu);
        return commands.size();
    }
};

// Waits (bounded) until the server counts `n` clients.
bool wait_clients(const LiveServer& s, int n) {
    for (int i = 0; i < 500 && s.clients() != n; ++i) std::this_thread::sleep_for(10ms);
    return s.clients() == n;
}

void exercise_commands(LiveClient& client, Handled& handled) {
    EXPECT_TRUE(client.command(Command::of(Command::Kind::Pause)).ok);
    EXPECT_TRUE(client.command(Command::of(Command::Kind::Resume)).ok);
    EXPECT_TRUE(client.command(Command::switch_recipe(1, "blockwise")).ok);
    EXPECT_TRUE(client.command(Command::capture_every(7)).ok);
    EXPECT_TRUE(client.command(Command::checkpoint("/tmp/x.ckpt")).ok);
    Reply bad = client.command(Command::switch_recipe(0, "nonsense"));
    EXPECT_FALSE(bad.ok);
    EXPECT_NE(bad.error.find("unknown training recipe 'nonsense'"), std::string::npos) << bad.error;
    EXPECT_TRUE(client.command(Command::of(Command::Kind::Stop)).ok);
    std::lock_guard lock(handled.mu);
    ASSERT_EQ(handled.commands.size(), 6u);
    EXPECT_EQ(handled.commands[0].kind, Command::Kind::Pause);
    EXPECT_EQ(handled.commands[1].kind, Command::Kind::Resume);
    EXPECT_EQ(handled.commands[2].kind, Command::Kind::SwitchRecipe);
    EXPECT_EQ(handled.commands[2].run, 1);
    EXPECT_EQ(handled.commands[2].recipe, "blockwise");
    EXPECT_EQ(handled.commands[3].every, 7);
    EXPECT_EQ(handled.commands[4].path, "/tmp/x.ckpt");
    EXPECT_EQ(handled.commands[5].kind, Command::Kind::Stop);
}

TEST(Live, UnixSocketCarriesMetaRecordsAndCommands) {
    TempDir dir;
    TraceMeta m = sample_meta();
    Handled handled;
    LiveServer server(m, listen_on("unix:" + dir.file("engine.sock")), handled.handler());
    EXPECT_EQ(server.address(), "unix:" + dir.file("engine.sock"));
    EXPECT_TRUE(server.token().empty());
    struct stat st{};
    ASSERT_EQ(stat(dir.file("engine.sock").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);

    LiveClient client(server.address());
    EXPECT_EQ(client.meta().recipes, m.recipes);
    EXPECT_EQ(client.meta().linears[1].name, m.linears[1].name);
    EXPECT_EQ(client.meta().config_json, m.config_json);
    ASSERT_TRUE(wait_clients(server, 1));

    OperandRecord o = sample_operand(m, {1, 5, 1, Gemm::Dgrad, Operand::W});
    o.errors[0].sqnr_db = std::numeric_limits<double>::infinity();  // a perfect cast
    server.write(sample_step(0, 3));
    server.write(o);
    server.write(OpNameRecord{3, "late_kernel"});
    server.write(OpRecord{0, 3, 3, -1, -1, 0, 1, 10, 20});
    server.write(sample_blockmap({0, 3, 0, Gemm::Fprop, Operand::X}, 2));
    server.write(sample_scaling(m, 0, 3));
    server.write(EventRecord{-1, 3, EventKind::Pause, "paused"});

    auto r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<StepRecord>(*r));
    EXPECT_EQ(std::get<StepRecord>(*r).loss, sample_step(0, 3).loss);
    EXPECT_TRUE(std::isnan(std::get<StepRecord>(*r).eval_loss));
    r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<OperandRecord>(*r));
    const auto& got = std::get<OperandRecord>(*r);
    EXPECT_EQ(got.stats.histogram.bins, o.stats.histogram.bins);
    EXPECT_EQ(got.stats.outliers.channel_absmax, o.stats.outliers.channel_absmax);
    EXPECT_EQ(got.amax_history, o.amax_history);
    EXPECT_EQ(got.errors[0].sqnr_db, std::numeric_limits<double>::infinity());
    EXPECT_EQ(got.errors[2].mse, o.errors[2].mse);
    EXPECT_EQ(got.stats.outliers.top[3].row, o.stats.outliers.top[3].row);
    r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<OpNameRecord>(*r));
    EXPECT_EQ(client.meta().ops.back(), "late_kernel");
    r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<OpRecord>(*r));
    EXPECT_EQ(std::get<OpRecord>(*r).op, 3);
    r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<BlockMapRecord>(*r));
    EXPECT_EQ(std::get<BlockMapRecord>(*r).sqnr_db, sample_blockmap({0, 3, 0, Gemm::Fprop, Operand::X}, 2).sqnr_db);
    r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<ScalingRecord>(*r));
    EXPECT_EQ(std::get<ScalingRecord>(*r).amax, sample_scaling(m, 0, 3).amax);
    r = client.next(5s);
    ASSERT_TRUE(r && std::holds_alternative<EventRecord>(*r));
    EXPECT_EQ(std::get<EventRecord>(*r).detail, "paused");
    EXPECT_FALSE(client.next(50ms).has_value());

    // A client connecting later gets the op names added since the start in its meta.
    LiveClient late(server.address());
    EXPECT_EQ(late.meta().ops.back(), "late_kernel");

    exercise_commands(client, handled);
}

TEST(Live, GarbageFramesGetErrorsAndChangeNothing) {
    TempDir dir;
    Handled handled;
    LiveServer server(sample_meta(), listen_on("unix:" + dir.file("s")), handled.handler());
    LiveClient client(server.address());

    std::vector<std::uint8_t> junk = {0xde, 0xad, 0xbe, 0xef, 0x01};
    auto f = encode_frame(MsgType::Command, junk);  // not MessagePack
    client.send_raw(f.data(), f.size());
    auto r = client.next_reply(5s);
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->ok);
    EXPECT_NE(r->error.find("malformed command"), std::string::npos) << r->error;

    f = encode_frame(static_cast<MsgType>(99), {1, 2, 3});  // unknown type
    client.send_raw(f.data(), f.size());
    r = client.next_reply(5s);
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->ok);
    EXPECT_NE(r->error.find("unexpected message type 99"), std::string::npos) << r->error;

    f = encode_frame(MsgType::Command, json_free_command("reboot"));
    client.send_raw(f.data(), f.size());
    r = client.next_reply(5s);
    ASSERT_TRUE(r);
    EXPECT_NE(r->error.find("unknown command 'reboot'"), std::string::npos) << r->error;

    EXPECT_FALSE(client.command(Command::capture_every(-5)).ok);
    EXPECT_EQ(handled.size(), 0u);
    EXPECT_TRUE(client.command(Command::of(Command::Kind::Pause)).ok);  // the connection still works
    EXPECT_EQ(handled.size(), 1u);

    std::uint8_t huge[5] = {0xff, 0xff, 0xff, 0xff, 17};  // a length past the limit
    client.send_raw(huge, sizeof huge);
    r = client.next_reply(5s);
    ASSERT_TRUE(r);
    EXPECT_NE(r->error.find("protocol error"), std::string::npos) << r->error;
    EXPECT_THROW(client.next(5s), LiveError);  // then the server hangs up
    EXPECT_EQ(handled.size(), 1u);
}

TEST(Live, TcpNeedsTheToken) {
    Handled handled;
    LiveServer server(sample_meta(), listen_on("tcp:0", "s3cret-token"), handled.handler());
    ASSERT_EQ(server.address().rfind("tcp:127.0.0.1:", 0), 0u) << server.address();
    EXPECT_EQ(server.token(), "s3cret-token");

    try {
        LiveClient bad(server.address(), "wrong-token");
        FAIL() << "a wrong token was accepted";
    } catch (const LiveError& e) {
        EXPECT_NE(std::string(e.what()).find("wrong token"), std::string::npos) << e.what();
    }
    // Skipping the handshake: a command first is refused and nothing runs.
    {
        auto colon = server.address().rfind(':');
        Fd raw = connect_tcp("127.0.0.1", std::stoi(server.address().substr(colon + 1)));
        auto f = encode_frame(MsgType::Command, encode_command(Command::of(Command::Kind::Stop)));
        ASSERT_TRUE(send_all(raw.get(), f.data(), f.size()));
        FrameReader in;
        char buf[4096];
        std::optional<Frame> reply;
        for (int i = 0; i < 100 && !reply; ++i) {
            ssize_t n = recv(raw.get(), buf, sizeof buf, 0);
            if (n <= 0) break;
            in.feed(buf, n);
            reply = in.next();
        }
        ASSERT_TRUE(reply);
        EXPECT_EQ(reply->type, MsgType::Reply);
        EXPECT_NE(decode_reply(reply->payload).error.find("authentication required"), std::string::npos);
    }
    EXPECT_EQ(handled.size(), 0u);
    EXPECT_EQ(server.clients(), 0);

    LiveClient client(server.address(), "s3cret-token");
    EXPECT_EQ(client.meta().runs.size(), 2u);
    server.write(sample_step(1, 9));  // may race the client's registration: wait for it
    ASSERT_TRUE(wait_clients(server, 1));
    server.write(sample_step(1, 10));
    std::optional<Record> r;
    do r = client.next(5s);
    while (r && std::get<StepRecord>(*r).step != 10);
    ASSERT_TRUE(r);
    exercise_commands(client, handled);
}

TEST(Live, ARandomTokenIsMadeForTcp) {
    Handled handled;
    LiveServer server(sample_meta(), listen_on("tcp:0"), handled.handler());
    EXPECT_GE(server.token().size(), 32u);
    LiveClient client(server.address(), server.token());
    EXPECT_EQ(client.meta().recipes, sample_meta().recipes);
}

TEST(Live, AClientThatDoesNotReadIsDroppedWithoutStallingTheWriter) {
    TempDir dir;
    Handled handled;
    LiveServer server(sample_meta(), listen_on("unix:" + dir.file("s"), "", 256u << 10),
                      handled.handler());
    LiveClient sleeper(server.address());  // never reads again
    ASSERT_TRUE(wait_clients(server, 1));
    TraceMeta m = sample_meta();
    OperandRecord o = sample_operand(m, {0, 1, 0, Gemm::Fprop, Operand::X});
    for (int i = 0; i < 200000 && server.clients() > 0; ++i) server.write(o);  // returns every time
    EXPECT_TRUE(wait_clients(server, 0));
    // The server still serves others.
    LiveClient fresh(server.address());
    EXPECT_TRUE(fresh.command(Command::of(Command::Kind::Pause)).ok);
}

TEST(Live, EndpointSpecs) {
    EXPECT_FALSE(parse_endpoint("unix").tcp);
    EXPECT_EQ(parse_endpoint("unix:/x/y.sock").path, "/x/y.sock");
    Endpoint t = parse_endpoint("tcp:7000");
    EXPECT_TRUE(t.tcp);
    EXPECT_EQ(t.host, "127.0.0.1");
    EXPECT_EQ(t.port, 7000);
    Endpoint a = parse_endpoint("0.0.0.0:7001");
    EXPECT_EQ(a.host, "0.0.0.0");
    EXPECT_EQ(a.port, 7001);
    EXPECT_THROW(parse_endpoint("tcp:http"), std::invalid_argument);
    EXPECT_THROW(parse_endpoint("tcp:70000"), std::invalid_argument);
    EXPECT_THROW(parse_endpoint("nonsense"), std::invalid_argument);
    std::string d = default_socket_path();
    struct stat st{};
    ASSERT_EQ(stat(d.substr(0, d.rfind('/')).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
}

}  // namespace
}  // namespace fp8scope::trace::live
