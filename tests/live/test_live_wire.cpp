// The live wire format: every message decodes to what was encoded, and every malformed
// body (truncated anywhere, trailing bytes, counts past the frame, enums out of range)
// is refused with WireError instead of crashing or allocating without bound.
#include <gtest/gtest.h>

#include <cstring>

#include "live_test_util.h"
#include "live_wire.h"

namespace fp8scope::live::test {
namespace {

using wire::FrameView;
using wire::Split;

const trace::OperandKey kKey{1, 10, 1, Gemm::Dgrad, Operand::DY};
const trace::OperandKey kMapKey{0, 10, 1, Gemm::Fprop, Operand::W};

FrameView split_one(const std::string& bytes) {
    FrameView f{};
    std::size_t used = 0;
    EXPECT_EQ(wire::split_frame(bytes, f, used), Split::Frame);
    EXPECT_EQ(used, bytes.size());
    return f;
}

// Decoding must fail for every proper prefix of the body and for one extra byte.
template <class Decode>
void expect_strict(const std::string& frame, Decode decode) {
    const std::string body = frame.substr(wire::kHeader);
    for (std::size_t n = 0; n < body.size(); ++n)
        EXPECT_THROW(decode(std::string_view(body).substr(0, n)), wire::WireError) << "prefix " << n;
    EXPECT_THROW(decode(body + '\0'), wire::WireError);
}

TEST(LiveWire, FrameHeaderCountsTypeAndBody) {
    std::string f = wire::frame(sample_step(0, 3));
    std::uint32_t len;
    std::memcpy(&len, f.data(), 4);
    EXPECT_EQ(len, f.size() - 4);
    EXPECT_EQ(static_cast<wire::Msg>(f[4]), wire::Msg::Step);
}

TEST(LiveWire, EveryRecordRoundTrips) {
    auto meta = sample_meta();
    meta.rank = 1;
    meta.world_size = 2;
    meta.grad_dtype = "e5m2";
    meta.precision = {{1, 0, Gemm::Wgrad, "baseline", "", "", 1}, {1, 1, Gemm::Fprop, "delayed", "delayed_e4m3", "delayed_e4m3", 0}};
    auto m = wire::decode_meta(split_one(wire::frame(wire::MetaMsg{wire::kVersion, meta})).body);
    EXPECT_EQ(m.version, wire::kVersion);
    expect_same(m.meta, meta);
    ASSERT_EQ(m.meta.precision.size(), 2u);
    EXPECT_EQ(m.meta.precision[1].a, "delayed_e4m3");
    EXPECT_EQ(m.meta.precision[0].overridden, 1);
    // A Meta of version 6 goes on without the plans.
    EXPECT_TRUE(wire::decode_meta(split_one(wire::frame(wire::MetaMsg{6, meta})).body).meta.precision.empty());
    const auto step7 = sample_step(0, 7), step8 = sample_step(1, 8);
    expect_same(wire::decode_step(split_one(wire::frame(step7)).body), step7);
    expect_same(wire::decode_step(split_one(wire::frame(step8)).body), step8);
    const auto event = sample_event(1, 9, trace::EventKind::RecipeSwitch);
    expect_same(wire::decode_event(split_one(wire::frame(event)).body), event);
    const auto scaling = sample_scaling(meta, 1, 9);
    expect_same(wire::decode_scaling(split_one(wire::frame(scaling)).body), scaling);
    const auto operand = sample_operand(meta, kKey);
    expect_same(wire::decode_operand(split_one(wire::frame(operand)).body), operand);
    const auto map = sample_blockmap(kMapKey, 2);
    expect_same(wire::decode_blockmap(split_one(wire::frame(map)).body), map);
    const auto op = sample_op(1, 11, 3);
    expect_same(wire::decode_op(split_one(wire::frame(op)).body), op);
    const auto name = sample_op_name(meta);
    expect_same(wire::decode_op_name(split_one(wire::frame(name)).body), name);
    const auto rank = sample_rank_step(12, 1);
    const std::string rank_bytes = wire::frame(rank);
    const FrameView rank_frame = split_one(rank_bytes);
    EXPECT_EQ(rank_frame.type, wire::Msg::RankStep);
    expect_same(wire::decode_rank_step(rank_frame.body), rank);
    expect_strict(rank_bytes, [](std::string_view b) { return wire::decode_rank_step(b); });

    auto h = wire::decode_hello(split_one(wire::frame(wire::Hello{wire::kVersion, "s3cret"})).body);
    EXPECT_EQ(h.version, wire::kVersion);
    EXPECT_EQ(h.token, "s3cret");
    Command cmd{CommandKind::SwitchRecipe, 1, "blockwise", 42};
    auto c = wire::decode_command(split_one(wire::frame(wire::CommandMsg{77, cmd})).body);
    EXPECT_EQ(c.id, 77u);
    EXPECT_EQ(c.command.kind, CommandKind::SwitchRecipe);
    EXPECT_EQ(c.command.run, 1);
    EXPECT_EQ(c.command.recipe, "blockwise");
    EXPECT_EQ(c.command.value, 42);
    auto r = wire::decode_reply(split_one(wire::frame(wire::ReplyMsg{77, {false, "no replica 4"}})).body);
    EXPECT_EQ(r.id, 77u);
    EXPECT_FALSE(r.reply.ok);
    EXPECT_EQ(r.reply.error, "no replica 4");
    auto e = wire::decode_error(split_one(wire::frame(wire::ErrorMsg{wire::ErrorCode::WrongToken, "wrong token"})).body);
    EXPECT_EQ(e.code, wire::ErrorCode::WrongToken);
    EXPECT_EQ(e.message, "wrong token");
}

TEST(LiveWire, TruncatedOrPaddedBodiesAreRefused) {
    expect_strict(wire::frame(wire::MetaMsg{wire::kVersion, sample_meta()}), wire::decode_meta);
    const auto meta = sample_meta();
    expect_strict(wire::frame(sample_step(0, 1)), [](std::string_view b) { return wire::decode_step(b); });
    expect_strict(wire::frame(sample_event(1, 1, trace::EventKind::RecipeSwitch)), wire::decode_event);
    expect_strict(wire::frame(sample_scaling(meta, 1, 1)), wire::decode_scaling);
    expect_strict(wire::frame(sample_operand(meta, kKey)), wire::decode_operand);
    expect_strict(wire::frame(sample_blockmap(kMapKey, 2)), wire::decode_blockmap);
    expect_strict(wire::frame(sample_op(1, 1, 3)), wire::decode_op);
    expect_strict(wire::frame(sample_op_name(meta)), wire::decode_op_name);
    expect_strict(wire::frame(wire::Hello{wire::kVersion, "t"}), wire::decode_hello);
    expect_strict(wire::frame(wire::CommandMsg{1, {CommandKind::Stop, -1, "x", 0}}), wire::decode_command);
}

TEST(LiveWire, HugeCountIsRefusedBeforeAllocating) {
    // A scaling record whose amax count claims four billion floats.
    std::string body = wire::frame(sample_scaling(sample_meta(), 1, 1)).substr(wire::kHeader);
    const std::uint32_t huge = 0xffffffffu;
    std::memcpy(body.data() + 4 + 8, &huge, 4);
    EXPECT_THROW(wire::decode_scaling(body), wire::WireError);
}

TEST(LiveWire, EnumsOutOfRangeAreRefused) {
    std::string body = wire::frame(sample_event(1, 1, trace::EventKind::RecipeSwitch)).substr(wire::kHeader);
    const std::int32_t bad = 99;
    std::memcpy(body.data() + 4 + 8, &bad, 4);
    EXPECT_THROW(wire::decode_event(body), wire::WireError);

    std::string cmd = wire::frame(wire::CommandMsg{1, {}}).substr(wire::kHeader);
    std::memcpy(cmd.data() + 4, &bad, 4);
    EXPECT_THROW(wire::decode_command(cmd), wire::WireError);

    std::string op = wire::frame(sample_operand(sample_meta(), kKey)).substr(wire::kHeader);
    op[4 + 8 + 4] = 7;  // gemm
    EXPECT_THROW(wire::decode_operand(op), wire::WireError);
}

TEST(LiveWire, OpNameWithoutAnIdOrANameIsRefused) {
    // Body: i32 id, u32 length, the name's bytes.
    const auto name = sample_op_name(sample_meta());
    std::string body = wire::frame(name).substr(wire::kHeader);
    const std::int32_t negative = -1;
    std::string bad_id = body;
    std::memcpy(bad_id.data(), &negative, 4);
    EXPECT_THROW(wire::decode_op_name(bad_id), wire::WireError);

    std::string empty = wire::frame(trace::OpNameRecord{4, ""}).substr(wire::kHeader);
    ASSERT_EQ(empty.size(), 8u);
    EXPECT_THROW(wire::decode_op_name(empty), wire::WireError);

    std::string long_count = body;
    const std::uint32_t one_more = static_cast<std::uint32_t>(name.name.size() + 1);
    std::memcpy(long_count.data() + 4, &one_more, 4);
    EXPECT_THROW(wire::decode_op_name(long_count), wire::WireError);

    // Id 0 and a one-character name are fine.
    auto n = wire::decode_op_name(wire::frame(trace::OpNameRecord{0, "k"}).substr(wire::kHeader));
    EXPECT_EQ(n.id, 0);
    EXPECT_EQ(n.name, "k");
}

TEST(LiveWire, HelloWithoutMagicIsRefused) {
    std::string body = wire::frame(wire::Hello{wire::kVersion, "t"}).substr(wire::kHeader);
    body[0] = 'X';
    EXPECT_THROW(wire::decode_hello(body), wire::WireError);
}

TEST(LiveWire, SplitFrameWaitsForWholeFramesAndRefusesBadLengths) {
    std::string two = wire::frame(sample_step(0, 1)) + wire::frame(sample_op(1, 2, 3));
    FrameView f{};
    std::size_t used = 0;
    const std::size_t first = wire::frame(sample_step(0, 1)).size();
    for (std::size_t n = 0; n < first; ++n)
        EXPECT_EQ(wire::split_frame(std::string_view(two).substr(0, n), f, used), Split::NeedMore) << n;
    ASSERT_EQ(wire::split_frame(two, f, used), Split::Frame);
    EXPECT_EQ(used, first);
    EXPECT_EQ(f.type, wire::Msg::Step);
    ASSERT_EQ(wire::split_frame(std::string_view(two).substr(used), f, used), Split::Frame);
    EXPECT_EQ(f.type, wire::Msg::Op);

    std::string big(5, '\0');
    const std::uint32_t over = wire::kMaxFrame + 1;
    std::memcpy(big.data(), &over, 4);
    EXPECT_EQ(wire::split_frame(big, f, used), Split::TooLarge);
    EXPECT_EQ(wire::split_frame(std::string(4, '\0'), f, used), Split::Empty);
}

}  // namespace
}  // namespace fp8scope::live::test
