// Op names that appear after a run started (CUPTI kernels) reach live clients: names go
// from OpNames through the LivePublisher and the server; a client connected at the time
// gets each name before the op records that use it, a client that connects later finds
// the names so far in its metadata. A name out of order is refused by the server, and a
// client that is sent one closes the connection.
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>

#include "live_publisher.h"
#include "live_server.h"
#include "live_socket.h"
#include "live_test_util.h"
#include "live_wire.h"
#include "stats_capture.h"

namespace fp8scope::live::test {
namespace {

using namespace std::chrono_literals;

// The sample metadata with a fourth op, so that names added late start at id 4.
trace::TraceMeta four_op_meta() {
    trace::TraceMeta m = sample_meta();
    m.ops.push_back("quantize");
    return m;
}

// A client that also counts op records whose id it had no name for when they arrived.
struct NamingClient {
    explicit NamingClient(const LiveServer& server) {
        ClientHandlers h = got.handlers();
        auto keep_op = h.on_op;
        h.on_op = [this, keep_op](const trace::OpRecord& r) {
            {
                std::lock_guard lock(got.mu);
                const std::size_t named = got.meta.at(0).ops.size() + got.op_names.size();
                unnamed += static_cast<std::size_t>(r.op) >= named;
            }
            keep_op(r);
        };
        client = std::make_unique<LiveClient>(server.endpoint(), server.token(), std::move(h));
    }
    Collected got;
    std::size_t unnamed = 0;  // guarded by got.mu
    std::unique_ptr<LiveClient> client;
};

std::vector<std::string> names_of(const std::vector<trace::OpNameRecord>& v) {
    std::vector<std::string> out;
    for (const auto& n : v) out.push_back(n.name);
    return out;
}

TEST(LiveOpNames, LateNamesReachClientsConnectedBeforeAndAfter) {
    TempDir dir;
    const trace::TraceMeta meta = four_op_meta();  // ops: fprop, dgrad, wgrad, quantize
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", meta, nullptr);
    LivePublisher publisher(server);
    trace::OpNames names(meta.ops);
    const std::string gemm = "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n";
    const std::string amax = "amax_reduce_kernel";

    // As StatsCapture::on_op does: the id (a new name goes out first), then the record.
    std::vector<trace::OpRecord> sent;
    auto op = [&](const std::string& name, std::int64_t step) {
        trace::OpRecord r = sample_op(0, step, 0);
        r.op = names.id(name, publisher);
        r.start_ns += static_cast<std::int64_t>(sent.size());
        publisher.write(r);
        sent.push_back(r);
    };

    NamingClient early(server);
    op(gemm, 1);     // new: id 4
    op("fprop", 1);  // in the table from the start: id 0
    ASSERT_TRUE(early.got.wait([&] { return early.got.ops.size() == 2; }));
    NamingClient late(server);
    op(gemm, 2);     // known by now
    op(amax, 2);     // new: id 5
    ASSERT_TRUE(early.got.wait([&] { return early.got.ops.size() == 4; }));
    ASSERT_TRUE(late.got.wait([&] { return late.got.ops.size() == 2; }));
    EXPECT_EQ(sent[0].op, 4);
    EXPECT_EQ(sent[1].op, 0);
    EXPECT_EQ(sent[2].op, 4);
    EXPECT_EQ(sent[3].op, 5);

    {
        std::lock_guard lock(early.got.mu);
        EXPECT_EQ(early.got.meta.at(0).ops, meta.ops);
        ASSERT_EQ(early.got.op_names.size(), 2u);
        expect_same(early.got.op_names[0], trace::OpNameRecord{4, gemm});
        expect_same(early.got.op_names[1], trace::OpNameRecord{5, amax});
        ASSERT_EQ(early.got.ops.size(), 4u);
        for (std::size_t i = 0; i < 4; ++i) expect_same(early.got.ops[i], sent[i]);
        EXPECT_EQ(early.unnamed, 0u);
    }
    {
        std::lock_guard lock(late.got.mu);
        auto with_gemm = meta.ops;
        with_gemm.push_back(gemm);
        EXPECT_EQ(late.got.meta.at(0).ops, with_gemm);
        EXPECT_EQ(names_of(late.got.op_names), std::vector<std::string>{amax});
        EXPECT_EQ(late.got.op_names.at(0).id, 5);
        ASSERT_EQ(late.got.ops.size(), 2u);
        expect_same(late.got.ops[0], sent[2]);
        expect_same(late.got.ops[1], sent[3]);
        EXPECT_EQ(late.unnamed, 0u);
    }

    // A third client sees both names in its table and nothing else about them.
    NamingClient last(server);
    ASSERT_TRUE(last.got.wait([&] { return last.got.meta.size() == 1; }));
    std::lock_guard lock(last.got.mu);
    auto all = meta.ops;
    all.insert(all.end(), {gemm, amax});
    EXPECT_EQ(last.got.meta[0].ops, all);
    EXPECT_TRUE(last.got.op_names.empty());
}

TEST(LiveOpNames, ANameOutOfOrderIsRefusedAndTheStreamGoesOn) {
    TempDir dir;
    const trace::TraceMeta meta = four_op_meta();
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", meta, nullptr);
    NamingClient client(server);
    EXPECT_THROW(server.publish(trace::OpNameRecord{6, "skips_ids"}), std::invalid_argument);
    EXPECT_THROW(server.publish(trace::OpNameRecord{2, "wgrad_again"}), std::invalid_argument);
    EXPECT_THROW(server.publish(trace::OpNameRecord{4, ""}), std::invalid_argument);
    server.publish(sample_op_name(meta));
    trace::OpRecord r = sample_op(0, 1, 0);
    r.op = sample_op_name(meta).id;
    server.publish(r);
    ASSERT_TRUE(client.got.wait([&] { return client.got.ops.size() == 1; }));
    std::lock_guard lock(client.got.mu);
    ASSERT_EQ(client.got.op_names.size(), 1u);
    expect_same(client.got.op_names[0], sample_op_name(meta));
    EXPECT_TRUE(client.got.closed.empty());
    EXPECT_EQ(client.unnamed, 0u);
}

// A stand-in engine that skips an id: the client must not attach the name to id 4.
TEST(LiveOpNames, AClientClosesOnANameOutOfOrder) {
    TempDir dir;
    Endpoint e = parse_endpoint("unix:" + (dir / "fake.sock"));
    net::Fd listener = net::listen_on(e);
    Collected got;
    auto connecting =
        std::async(std::launch::async, [&] { return std::make_unique<LiveClient>(e, "", got.handlers()); });
    net::Fd conn;
    ASSERT_TRUE(eventually([&] {
        if (int fd = net::accept_one(listener.get()); fd >= 0) conn = net::Fd(fd);
        return static_cast<bool>(conn);
    }));
    trace::OpRecord r = sample_op(0, 1, 0);
    r.op = 5;
    const std::string frames = wire::frame(wire::MetaMsg{wire::kVersion, four_op_meta()}) +
                               wire::frame(trace::OpNameRecord{5, "skips_id_4"}) + wire::frame(r);
    ASSERT_TRUE(net::send_all(conn.get(), frames, 5s));
    auto client = connecting.get();
    ASSERT_TRUE(got.wait([&] { return !got.closed.empty(); }));
    std::lock_guard lock(got.mu);
    EXPECT_NE(got.closed[0].find("op name: id 5 is not the next id 4"), std::string::npos) << got.closed[0];
    EXPECT_TRUE(got.op_names.empty());
    EXPECT_TRUE(got.ops.empty());
}

}  // namespace
}  // namespace fp8scope::live::test
