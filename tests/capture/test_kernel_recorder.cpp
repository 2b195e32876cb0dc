// Kernel timings into trace records: each kernel is attributed to the op scope it was
// launched in (run, step, layer, linear, operand, and the op as its parent); a kernel of
// no known scope counts in the current step; names get ids once. Every step's records are
// summed per run, kernel and op, and kept individually only on the steps the policy names
// (capture steps, windows around events, live requests).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "kernel_recorder.h"
#include "util/kernel_name.h"
#include "vector_sink.h"

#include <functional>

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
    k.flush();

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
    k.flush();
    auto ops = sink.all<OpRecord>();
    ASSERT_EQ(ops.size(), 2u);
    // Step 2 was written when step 3 began: its record is written on its own, first.
    EXPECT_EQ(ops[0].step, 2);
    EXPECT_EQ(ops[0].linear, 1);
    EXPECT_EQ(ops[1].step, 3);
    EXPECT_EQ(ops[1].linear, -1);
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
    k.flush();
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

// One kernel per step in the scope of run 0's fprop of that step (scope = step).
void run_steps(KernelRecorder& k, std::int64_t from, std::int64_t to, const std::set<std::int64_t>& capture,
               const std::function<void(std::int64_t)>& during = {}) {
    for (std::int64_t s = from; s <= to; ++s) {
        k.begin_step(s, capture.count(s) > 0);
        k.note_scope(static_cast<std::uint64_t>(s), host_op(0, s, 0, 0, 0, -1));
        const KernelTiming t{KernelTiming::Kind::Kernel, "gemm", 0, 0, s * 100, s * 100 + 10, 0, static_cast<std::uint64_t>(s)};
        k.on_kernels(&t, 1);
        if (during) during(s);
    }
    k.flush();
}

std::set<std::int64_t> kept_steps(const VectorSink& sink) {
    std::set<std::int64_t> out;
    for (const OpRecord& r : sink.all<OpRecord>()) out.insert(r.step);
    return out;
}

TEST(KernelRecorder, SumsEqualTheRecordsOfTheirStep) {
    // Two runs over three steps: kernels of both runs' ops, copies outside every op (the
    // batch copy before run 1's fprop is run 1's; the snapshot copy after the last op is
    // the last op's run), a kernel called twice. Summed in the test, by hand-assigned run.
    VectorSink sink;
    OpNames names({"fprop", "optimizer"});
    KernelRecorder k(sink, names);
    struct Call {
        const char* name;
        KernelTiming::Kind kind;
        std::int64_t start, end, bytes;
        int run;  // whose it is: -1 outside every op
        int op;
    };
    const Call calls[] = {{"memcpy HtoD", KernelTiming::Kind::Memcpy, 0, 5, 64, -1, 0},
                          {"gemm", KernelTiming::Kind::Kernel, 10, 40, 0, 0, 0},
                          {"gemm", KernelTiming::Kind::Kernel, 45, 60, 0, 0, 0},
                          {"adam", KernelTiming::Kind::Kernel, 61, 70, 0, 0, 1},
                          {"memcpy HtoD", KernelTiming::Kind::Memcpy, 71, 74, 64, -1, 0},
                          {"gemm", KernelTiming::Kind::Kernel, 80, 130, 0, 1, 0},
                          {"memset", KernelTiming::Kind::Memset, 131, 132, 8, -1, 0}};
    const int owner_run[] = {0, 0, 0, 0, 1, 1, 1};  // by time: the next op's run; after the last op, its run
    std::map<std::tuple<std::int64_t, int, std::string, int>, std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> want;
    for (std::int64_t step = 1; step <= 3; ++step) {
        k.begin_step(step);
        const std::int64_t t0 = step * 1000;
        std::uint64_t scope = static_cast<std::uint64_t>(step) * 10;
        std::vector<KernelTiming> t;
        for (std::size_t i = 0; i < std::size(calls); ++i) {
            const Call& c = calls[i];
            std::uint64_t sc = 0;
            if (c.run >= 0) {
                sc = ++scope;
                k.note_scope(sc, host_op(c.run, step, c.op, -1, -1, -1));
            }
            // Step 2's gemms take twice as long: the sums follow the records.
            const std::int64_t len = (c.end - c.start) * (step == 2 && c.kind == KernelTiming::Kind::Kernel ? 2 : 1);
            t.push_back({c.kind, c.name, 0, 7, t0 + c.start, t0 + c.start + len, c.bytes, sc});
            auto& [count, total, lo, hi, bytes] = want[{step, owner_run[i], c.name, c.run >= 0 ? c.op : -1}];
            lo = count ? std::min(lo, len) : len;
            hi = count ? std::max(hi, len) : len;
            ++count;
            total += len;
            bytes += c.bytes;
        }
        k.on_kernels(t.data(), 3);  // in two batches, as a tracer delivers them
        k.on_kernels(t.data() + 3, t.size() - 3);
    }
    k.flush();
    const auto sums = sink.all<KernelStepRecord>();
    std::vector<std::string> id_name = {"fprop", "optimizer"};
    for (const auto& n : sink.all<OpNameRecord>()) id_name.push_back(n.name);
    ASSERT_EQ(sums.size(), want.size());
    for (const KernelStepRecord& s : sums) {
        const auto it = want.find({s.step, s.run, id_name.at(static_cast<std::size_t>(s.op)), s.parent});
        ASSERT_NE(it, want.end()) << "step " << s.step << " run " << s.run << " " << id_name[s.op];
        const auto [count, total, lo, hi, bytes] = it->second;
        EXPECT_EQ(s.count, count);
        EXPECT_EQ(s.total_ns, total);
        EXPECT_EQ(s.min_ns, lo);
        EXPECT_EQ(s.max_ns, hi);
        EXPECT_EQ(s.bytes, bytes);
        EXPECT_EQ(s.detailed, 1);
    }
    // The default policy keeps every record, and the sums are of exactly those.
    EXPECT_EQ(sink.all<OpRecord>().size(), 3 * std::size(calls));
    EXPECT_EQ(k.recorded(), k.summed());
}

TEST(KernelRecorder, CaptureKeepsCaptureStepsEventWindowsAndRequests) {
    // Capture steps 1, 11, 21; an event during step 6 with a window of 2 keeps 4..8; a
    // request for 3 steps made during step 17 keeps 18, 19, 20. Every step has its sum.
    VectorSink sink;
    OpNames names({"fprop"});
    KernelRecorder k(sink, names, KernelPolicy::parse("capture", 2));
    run_steps(k, 1, 25, {1, 11, 21}, [&](std::int64_t s) {
        if (s == 6) k.mark_event();
        if (s == 17) k.request(3);
    });
    const std::set<std::int64_t> want = {1, 4, 5, 6, 7, 8, 11, 18, 19, 20, 21};
    EXPECT_EQ(kept_steps(sink), want);
    const auto sums = sink.all<KernelStepRecord>();
    ASSERT_EQ(sums.size(), 25u);
    for (const KernelStepRecord& s : sums) {
        EXPECT_EQ(s.count, 1);
        EXPECT_EQ(s.total_ns, 10);
        EXPECT_EQ(s.detailed, want.count(s.step) ? 1 : 0) << "step " << s.step;
    }
    EXPECT_EQ(k.recorded(), 11);
    EXPECT_EQ(k.summed(), 25);
}

TEST(KernelRecorder, WindowsAtTheEdgesAndOverlapping) {
    // An event at step 1 has no steps before it; two events 3 steps apart with a window
    // of 2 join: 9..11 and 12..14 -> 9..14; every=10 keeps 1, 11, 21.
    VectorSink sink;
    OpNames names({"fprop"});
    KernelRecorder k(sink, names, KernelPolicy::parse("every=10", 2));
    run_steps(k, 1, 22, {}, [&](std::int64_t s) {
        if (s == 1 || s == 11 || s == 12) k.mark_event();
    });
    EXPECT_EQ(kept_steps(sink), (std::set<std::int64_t>{1, 2, 3, 9, 10, 11, 12, 13, 14, 21}));
}

TEST(KernelRecorder, AllKeepsEveryStepAndEventsChangeNothing) {
    VectorSink sink;
    OpNames names({"fprop"});
    KernelRecorder k(sink, names, KernelPolicy::parse("all", 3));
    run_steps(k, 1, 6, {}, [&](std::int64_t s) {
        if (s == 3) k.mark_event();
    });
    EXPECT_EQ(kept_steps(sink).size(), 6u);
    EXPECT_EQ(sink.all<KernelStepRecord>().size(), 6u);
}

TEST(KernelRecorder, ARecordOfAWrittenStepIsSummedOnItsOwn) {
    // Window 0: step 1 is written when step 2 begins; a late record of step 1 then gets a
    // sum of its own (capture keeps no record of a non-capture step).
    VectorSink sink;
    OpNames names({"fprop"});
    KernelRecorder k(sink, names, KernelPolicy::parse("capture", 0));
    k.begin_step(1);
    k.note_scope(5, host_op(0, 1, 0, -1, -1, -1));
    k.begin_step(2);
    const KernelTiming t{KernelTiming::Kind::Kernel, "late", 0, 0, 10, 30, 0, 5};
    k.on_kernels(&t, 1);
    k.flush();
    const auto sums = sink.all<KernelStepRecord>();
    ASSERT_EQ(sums.size(), 1u);
    EXPECT_EQ(sums[0].step, 1);
    EXPECT_EQ(sums[0].total_ns, 20);
    EXPECT_EQ(sums[0].detailed, 0);
    EXPECT_TRUE(sink.all<OpRecord>().empty());
}

TEST(KernelPolicy, ParsesTheOptionAndNamesIt) {
    EXPECT_EQ(KernelPolicy::parse("all").mode, KernelPolicy::All);
    EXPECT_EQ(KernelPolicy::parse("off").mode, KernelPolicy::Off);
    const KernelPolicy every = KernelPolicy::parse("every=50", 7);
    EXPECT_EQ(every.mode, KernelPolicy::Every);
    EXPECT_EQ(every.every, 50);
    EXPECT_EQ(every.window, 7);
    EXPECT_EQ(every.name(), "every=50");
    EXPECT_EQ(KernelPolicy::parse("capture").name(), "capture");
    for (const char* bad : {"", "every=", "every=0", "every=-3", "every=5x", "some", "ALL"})
        EXPECT_THROW(KernelPolicy::parse(bad), std::invalid_argument) << bad;
    EXPECT_THROW(KernelPolicy::parse("all", -1), std::invalid_argument);
    try {
        KernelPolicy::parse("every=0");
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("'every=0'"), std::string::npos) << e.what();
    }
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
