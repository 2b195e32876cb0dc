// Kernel timings into trace records: each kernel is attributed to the op scope it was
// launched in (run, step, layer, linear, operand, and the op as its parent); a kernel of
// no known scope counts in the current step; names get ids once.
#include <gtest/gtest.h>

#include "kernel_recorder.h"
#include "util/kernel_name.h"
#include "vector_sink.h"

namespace fp8scope::trace {
namespace {

OpRecord host_op(std::int32_t run, std::int64_t step, std::int32_t op, int linear, int layer, int operand) {
    OpRecord r;
    r.run = run, r.step = step, r.op = op, r.linear = linear, r.layer = layer, r.operand = operand;
    return r;
}

TEST(KernelRecorder, KernelsTakeTheirScopesRunStepOpAndOperand) {
    VectorSink sink;
    OpNames names({"fprop", "quantize"});
    KernelRecorder k(sink, names);
    k.begin_step(4);
    k.note_scope(11, host_op(1, 4, 1, 5, 2, 2));   // quantize of dy, linear 5, run 1
    k.note_scope(12, host_op(0, 4, 0, 3, 0, -1));  // fprop of linear 3, run 0
    const KernelTiming t[] = {
        {KernelTiming::Kind::Kernel, "cast_tile<bf16>", 0, 7, 100, 250, 0, 11},
        {KernelTiming::Kind::Kernel, "gemm_sm90", 0, 7, 260, 900, 0, 12},
        {KernelTiming::Kind::Memcpy, "memcpy DtoH", 0, 7, 950, 990, 4096, 0},
        {KernelTiming::Kind::Kernel, "cast_tile<bf16>", 0, 7, 1000, 1100, 0, 999},  // a forgotten scope
    };
    k.on_kernels(t, 4);

    const auto ops = sink.all<OpRecord>();
    ASSERT_EQ(ops.size(), 4u);
    EXPECT_EQ(ops[0].run, 1);
    EXPECT_EQ(ops[0].step, 4);
    EXPECT_EQ(ops[0].parent, 1);
    EXPECT_EQ(ops[0].linear, 5);
    EXPECT_EQ(ops[0].layer, 2);
    EXPECT_EQ(ops[0].operand, 2);
    EXPECT_EQ(ops[0].kind, OpKind::Kernel);
    EXPECT_EQ(ops[0].device, 0);
    EXPECT_EQ(ops[0].stream, 7);
    EXPECT_EQ(ops[0].start_ns, 100);
    EXPECT_EQ(ops[0].end_ns, 250);
    EXPECT_EQ(ops[1].parent, 0);
    EXPECT_EQ(ops[1].linear, 3);
    EXPECT_EQ(ops[2].kind, OpKind::Memcpy);
    EXPECT_EQ(ops[2].bytes, 4096);
    EXPECT_EQ(ops[2].parent, -1);
    EXPECT_EQ(ops[2].run, 0);
    EXPECT_EQ(ops[2].step, 4);
    EXPECT_EQ(ops[3].parent, -1);
    EXPECT_EQ(ops[3].linear, -1);
    // New names get ids after the known ones, once each.
    const auto named = sink.all<OpNameRecord>();
    ASSERT_EQ(named.size(), 3u);
    EXPECT_EQ(named[0].name, "cast_tile<bf16>");
    EXPECT_EQ(named[0].id, 2);
    EXPECT_EQ(named[1].name, "gemm_sm90");
    EXPECT_EQ(named[2].name, "memcpy DtoH");
    EXPECT_EQ(ops[0].op, 2);
    EXPECT_EQ(ops[3].op, 2);
    EXPECT_EQ(k.recorded(), 4);
}

TEST(KernelRecorder, ScopesOfOldStepsAreForgotten) {
    VectorSink sink;
    OpNames names({"fprop"});
    KernelRecorder k(sink, names);
    k.begin_step(1);
    k.note_scope(1, host_op(0, 1, 0, 0, 0, -1));
    k.begin_step(2);
    k.note_scope(2, host_op(0, 2, 0, 1, 0, -1));
    k.begin_step(3);  // step 1's scope goes; step 2's stays (its kernels may still be in flight)
    const KernelTiming t[] = {{KernelTiming::Kind::Kernel, "a", 0, 0, 1, 2, 0, 1},
                              {KernelTiming::Kind::Kernel, "a", 0, 0, 3, 4, 0, 2}};
    k.on_kernels(t, 2);
    const auto ops = sink.all<OpRecord>();
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0].step, 3);
    EXPECT_EQ(ops[0].linear, -1);
    EXPECT_EQ(ops[1].step, 2);
    EXPECT_EQ(ops[1].linear, 1);
}

TEST(KernelRecorder, KernelsOfUnnotedInnerScopesBelongToTheEnclosingOp) {
    // Evaluation's forward opens scopes that report no timings (20 < scope < 26) inside
    // run 1's eval op; nested ranges go to the innermost op that holds the scope.
    VectorSink sink;
    OpNames names({"fprop", "eval"});
    KernelRecorder k(sink, names);
    k.begin_step(8);
    k.note_scope(20, host_op(1, 8, 1, -1, -1, -1), 26);
    k.note_scope(30, host_op(0, 8, 1, -1, -1, -1), 40);
    k.note_scope(32, host_op(0, 8, 0, 4, 1, -1), 35);
    k.note_scope(50, host_op(0, 8, 0, 2, 0, -1), 51);  // no inner scopes: no range
    const KernelTiming t[] = {{KernelTiming::Kind::Kernel, "a", 0, 0, 1, 2, 0, 23},
                              {KernelTiming::Kind::Kernel, "a", 0, 0, 3, 4, 0, 26},   // past the range
                              {KernelTiming::Kind::Kernel, "a", 0, 0, 5, 6, 0, 33},
                              {KernelTiming::Kind::Kernel, "a", 0, 0, 7, 8, 0, 36},
                              {KernelTiming::Kind::Kernel, "a", 0, 0, 9, 10, 0, 52}};
    k.on_kernels(t, 5);
    const auto ops = sink.all<OpRecord>();
    ASSERT_EQ(ops.size(), 5u);
    EXPECT_EQ(ops[0].run, 1);
    EXPECT_EQ(ops[0].parent, 1);
    EXPECT_EQ(ops[1].parent, -1);
    EXPECT_EQ(ops[2].parent, 0);
    EXPECT_EQ(ops[2].linear, 4);
    EXPECT_EQ(ops[3].parent, 1);
    EXPECT_EQ(ops[3].run, 0);
    EXPECT_EQ(ops[4].parent, -1);
}

TEST(KernelName, DemangledWithoutReturnTypeAndParameters) {
    // void fp8scope::cuda::(anonymous namespace)::cast<float, 2>(float const*, int)
    EXPECT_EQ(kernel_display_name("_ZN8fp8scope4cuda12_GLOBAL__N_14castIfLi2EEEvPKfi"),
              "fp8scope::cuda::(anonymous namespace)::cast<float, 2>");
    EXPECT_EQ(kernel_display_name("_Z6kernelPf"), "kernel");
    EXPECT_EQ(kernel_display_name("sm90_xmma_gemm_e4m3"), "sm90_xmma_gemm_e4m3");  // not mangled: as is
}

}  // namespace
}  // namespace fp8scope::trace
