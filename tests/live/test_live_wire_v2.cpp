// The bytes of protocol version 2 do not change but where versions 3 and 4 changed them:
// tests/data/live_wire_v2.bin holds a frame of every message type as the hand-written
// codec of that time encoded them (a Hello, Meta, two Steps, Event, Scaling, Operand with
// a +Inf sqnr and NaN figures, BlockMap, Op, OpName, Command, Reply, Error). Each decodes
// to the values it was made from and encodes back to the same bytes, except the Op,
// which version 3 extended with the kernel fields (its version-2 body is refused). The
// Meta carries its version: version 2's decodes without the fields later versions added
// after the others (rank and world_size in 4, grad_dtype in 5), and a Meta of version 4
// is version 2's with rank and world_size. A Step's step time is in seconds in version 2:
// read in that version, it comes out in milliseconds, as version 6 sends it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "live_test_util.h"
#include "live_wire.h"

namespace fp8scope::live::test {
namespace {

std::vector<std::string> v2_frames() {
    const auto path = std::filesystem::path(FP8SCOPE_SOURCE_DIR) / "tests" / "data" / "live_wire_v2.bin";
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<std::string> frames;
    std::string_view rest = bytes;
    wire::FrameView f{};
    std::size_t used = 0;
    while (!rest.empty() && wire::split_frame(rest, f, used) == wire::Split::Frame) {
        frames.emplace_back(rest.substr(0, used));
        rest.remove_prefix(used);
    }
    EXPECT_TRUE(rest.empty());
    return frames;
}

std::string_view body(const std::string& frame) { return std::string_view(frame).substr(wire::kHeader); }

TEST(LiveWireV2, EveryFrameDecodesAndEncodesToTheSameBytes) {
    const auto frames = v2_frames();
    ASSERT_EQ(frames.size(), 13u);
    std::size_t i = 0;

    auto hello = wire::decode_hello(body(frames[i]));
    EXPECT_EQ(hello.token, "s3cret");
    EXPECT_EQ(wire::frame(hello), frames[i++]);

    auto meta = wire::decode_meta(body(frames[i]));
    EXPECT_EQ(meta.version, 2u);
    EXPECT_EQ(meta.meta.rank, 0);
    EXPECT_EQ(meta.meta.world_size, 1);
    EXPECT_EQ(meta.meta.grad_dtype, "");
    EXPECT_EQ(meta.meta.tool_version, "0.9.1");
    ASSERT_EQ(meta.meta.linears.size(), 2u);
    EXPECT_EQ(meta.meta.linears[1].out_features, 128);
    EXPECT_EQ(meta.meta.ops.size(), 4u);
    EXPECT_EQ(meta.meta.blockmap_every, 50);
    EXPECT_EQ(wire::frame(meta), frames[i]);
    std::string meta4(body(frames[i]));
    const std::uint32_t four = 4;
    std::memcpy(meta4.data() + wire::kMagic.size(), &four, sizeof four);
    for (const std::int32_t v : {1, 3}) meta4.append(reinterpret_cast<const char*>(&v), sizeof v);  // rank 1 of 3
    meta.version = 4;
    meta.meta.rank = 1;
    meta.meta.world_size = 3;
    EXPECT_EQ(wire::frame(meta).substr(wire::kHeader), meta4);
    const auto meta_v4 = wire::decode_meta(meta4);
    EXPECT_EQ(meta_v4.meta.rank, 1);
    EXPECT_EQ(meta_v4.meta.world_size, 3);
    EXPECT_EQ(meta_v4.meta.tool_version, "0.9.1");
    ++i;

    auto step7 = wire::decode_step(body(frames[i]));
    EXPECT_EQ(step7.step, 7);
    EXPECT_EQ(step7.loss, 5.25 - 0.01 * 7.0);
    EXPECT_TRUE(std::isnan(step7.eval_loss));
    EXPECT_EQ(step7.recipe, 1);
    EXPECT_EQ(wire::frame(step7), frames[i]);
    const auto step7_v2 = wire::decode_step(body(frames[i++]), 2);
    EXPECT_GT(step7.step_ms, 0.0);
    EXPECT_EQ(step7_v2.step_ms, 1e3 * step7.step_ms);
    EXPECT_EQ(step7_v2.loss, step7.loss);
    auto step8 = wire::decode_step(body(frames[i]));
    EXPECT_EQ(step8.run, 1);
    EXPECT_EQ(step8.eval_loss, 5.5);
    EXPECT_EQ(wire::frame(step8), frames[i++]);

    auto event = wire::decode_event(body(frames[i]));
    EXPECT_EQ(event.kind, trace::EventKind::RecipeSwitch);
    EXPECT_EQ(event.detail, "delayed -> current");
    EXPECT_EQ(wire::frame(event), frames[i++]);

    auto scaling = wire::decode_scaling(body(frames[i]));
    ASSERT_EQ(scaling.amax.size(), 12u);
    EXPECT_EQ(scaling.amax[3], 2.0f);
    EXPECT_TRUE(std::isnan(scaling.scale[0]));
    EXPECT_EQ(wire::frame(scaling), frames[i++]);

    auto operand = wire::decode_operand(body(frames[i]));
    EXPECT_EQ(operand.key.gemm, Gemm::Dgrad);
    EXPECT_EQ(operand.key.operand, Operand::DY);
    EXPECT_EQ(operand.stats.numel, 4096);
    EXPECT_EQ(operand.stats.histogram.bins[100], 301);
    EXPECT_EQ(operand.stats.outliers.frac_beyond_k_rms, 0.002);
    EXPECT_EQ(operand.stats.outliers.top[1].value, -3.25f);
    ASSERT_EQ(operand.errors.size(), 2u);
    EXPECT_EQ(operand.errors[1].recipe, "mxfp8");
    EXPECT_EQ(operand.errors[1].sqnr_db, std::numeric_limits<double>::infinity());
    EXPECT_EQ(operand.errors[1].nonfinite_out, 3);
    EXPECT_EQ(operand.amax_history, (std::vector<float>{1.0f, 2.0f, 3.5f}));
    EXPECT_EQ(wire::frame(operand), frames[i++]);

    auto map = wire::decode_blockmap(body(frames[i]));
    EXPECT_EQ(map.quantizer, 3);
    EXPECT_EQ(map.grid_cols, 3);
    EXPECT_EQ(map.sqnr_db.back(), 35.0f);
    EXPECT_EQ(wire::frame(map), frames[i++]);

    EXPECT_ANY_THROW(wire::decode_op(body(frames[i++])));

    auto name = wire::decode_op_name(body(frames[i]));
    EXPECT_EQ(name.id, 4);
    EXPECT_EQ(wire::frame(name), frames[i++]);

    auto command = wire::decode_command(body(frames[i]));
    EXPECT_EQ(command.command.recipe, "blockwise");
    EXPECT_EQ(wire::frame(command), frames[i++]);
    auto reply = wire::decode_reply(body(frames[i]));
    EXPECT_EQ(reply.reply.error, "no replica 4");
    EXPECT_EQ(wire::frame(reply), frames[i++]);
    auto error = wire::decode_error(body(frames[i]));
    EXPECT_EQ(error.code, wire::ErrorCode::WrongToken);
    EXPECT_EQ(wire::frame(error), frames[i++]);
}

// Version 3's Op: a kernel with its op scope, operand and bytes, and a host op.
TEST(LiveWireV3, OpCarriesTheKernelFields) {
    trace::OpRecord k;
    k.run = 1, k.step = 9, k.op = 17, k.linear = 3, k.layer = 0, k.device = 0, k.stream = 7;
    k.start_ns = 1011, k.end_ns = 2022;
    k.kind = trace::OpKind::Memcpy, k.parent = 3, k.operand = 2, k.bytes = 1 << 20;
    const trace::OpRecord d = wire::decode_op(body(wire::frame(k)));
    EXPECT_EQ(d.kind, trace::OpKind::Memcpy);
    EXPECT_EQ(d.parent, 3);
    EXPECT_EQ(d.operand, 2);
    EXPECT_EQ(d.bytes, 1 << 20);
    EXPECT_EQ(d.stream, 7);
    EXPECT_EQ(d.end_ns, 2022);
    const trace::OpRecord h = wire::decode_op(body(wire::frame(trace::OpRecord{})));
    EXPECT_EQ(h.kind, trace::OpKind::Host);
    EXPECT_EQ(h.parent, -1);
}

// An Error event (the engine gave up or an action failed) is a valid kind on the wire.
TEST(LiveWireV2, EveryEventKindDecodes) {
    for (int k = 0; k < kEventKinds; ++k) {
        trace::EventRecord e{-1, 3, static_cast<trace::EventKind>(k), "x"};
        EXPECT_EQ(wire::decode_event(body(wire::frame(e))).kind, e.kind) << k;
    }
}

}  // namespace
}  // namespace fp8scope::live::test
