// The capture sink's gate/up alignment: hand-built fc1 weights whose channels' cosines are
// known exactly go through StatsCapture as a SwiGLU's fc1 operand, fc2's input gives the
// leading channel's amax; a GELU MLP (fc1 as wide as fc2's input) and steps without full
// capture get no record.
#include <gtest/gtest.h>

#include <vector>

#include "cpu/cpu_backend.h"
#include "stats_capture.h"
#include "trace_fixture.h"
#include "vector_sink.h"

namespace fp8scope::trace {
namespace {

CpuBackend& cpu() {
    static CpuBackend backend;
    return backend;
}

TraceMeta swiglu_meta() {
    TraceMeta m = testing::sample_meta();
    m.runs = {{"r", "current"}};
    m.quantizers = {"current_e4m3"};
    // Block 0 a SwiGLU MLP (fc1 3 -> 2 x 4, fc2 4 -> 3), block 1 a GELU one (fc1 3 -> 4).
    m.linears = {{"blocks.0.mlp.fc1", 0, 3, 8}, {"blocks.0.mlp.fc2", 0, 4, 3},
                 {"blocks.1.mlp.fc1", 1, 3, 4}, {"blocks.1.mlp.fc2", 1, 4, 3}};
    return m;
}

TEST(GateUpCapture, AlignmentOfHandBuiltRowsWithTheDownInputsAmax) {
    const TraceMeta m = swiglu_meta();
    VectorSink sink;
    OpNames ops(m.ops);
    StatsCapture cap(0, m, sink, ops);
    Recipe current = CurrentScaling{Format::E4M3};
    std::vector<float> fc1 = {
        1, 0, 0,  0, 1, 0,  1, 0, 0,  1, 0, 0,   // gate rows 0..3
        2, 0, 0,  0, -3, 0, 0, 0, 5,  6, 8, 0,   // up rows: cos 1, -1, 0, 0.6; |cos| x norms 2, 3, 0, 6
    };
    // fc2's input (N = 2 rows, H = 4 channels): channel absmax 1, 2, 3, 7.
    std::vector<float> down = {1, -2, 0.5f, 7, -0.25f, 1, -3, -1};
    std::vector<float> gelu_fc1(12, 1.0f);
    auto capture = [&](int linear, Operand o, std::vector<float>& v, std::int64_t rows, std::int64_t cols) {
        cap.on_operand(OperandCapture{linear, Gemm::Fprop, o, TensorDesc::of(v.data(), rows, cols, Device::CPU), &cpu(),
                                      &current, nullptr});
    };
    cap.begin_step(6, false, false);  // not a capture step: nothing
    capture(0, Operand::W, fc1, 8, 3);
    cap.end_step();
    EXPECT_TRUE(sink.all<GateUpAlignmentRecord>().empty());

    cap.begin_step(11, true, false);
    capture(0, Operand::W, fc1, 8, 3);
    capture(1, Operand::X, down, 2, 4);
    capture(2, Operand::W, gelu_fc1, 4, 3);
    EXPECT_TRUE(sink.all<GateUpAlignmentRecord>().empty());  // sent at the step's end
    cap.end_step();

    const auto rows = sink.all<GateUpAlignmentRecord>();
    ASSERT_EQ(rows.size(), 1u);  // block 1 is no SwiGLU
    const GateUpAlignmentRecord& a = rows[0];
    EXPECT_EQ(a.run, 0);
    EXPECT_EQ(a.step, 11);
    EXPECT_EQ(a.linear, 0);
    EXPECT_EQ(a.channels, 4);
    EXPECT_DOUBLE_EQ(a.mean_abs_cos, 0.65);
    EXPECT_DOUBLE_EQ(a.max_abs_cos, 1);
    EXPECT_DOUBLE_EQ(a.p99_abs_cos, 1);
    EXPECT_EQ(a.aligned, 2);
    EXPECT_EQ(a.top_channel, 3);
    EXPECT_DOUBLE_EQ(a.top_cos, 0.6);
    EXPECT_DOUBLE_EQ(a.top_norm_product, 10);
    EXPECT_EQ(a.top_down_amax, 7);
    EXPECT_EQ(a.down_amax_median, 2.5);  // of 1, 2, 3, 7
    EXPECT_EQ(check_record(m, m.ops.size(), a), "");

    // Without fc2's input captured the amax stays "not computed".
    cap.begin_step(21, true, false);
    capture(0, Operand::W, fc1, 8, 3);
    cap.begin_step(22, false, false);  // a step begun without end_step (a rewind) sends it too
    const auto later = sink.all<GateUpAlignmentRecord>();
    ASSERT_EQ(later.size(), 2u);
    EXPECT_EQ(later[1].step, 21);
    EXPECT_TRUE(std::isnan(later[1].top_down_amax));
    EXPECT_TRUE(std::isnan(later[1].down_amax_median));
}

TEST(GateUpCapture, WriterRefusesARecordOutsideTheMeta) {
    const TraceMeta m = swiglu_meta();
    GateUpAlignmentRecord r;
    r.linear = 9;
    EXPECT_NE(check_record(m, m.ops.size(), r).find("linear"), std::string::npos);
    r.linear = 0;
    r.channels = 4;
    r.top_channel = 4;
    EXPECT_NE(check_record(m, m.ops.size(), r).find("top_channel"), std::string::npos);
}

}  // namespace
}  // namespace fp8scope::trace
