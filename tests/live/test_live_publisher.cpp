// The capture records of a real run on the live stream (LivePublisher) against the HDF5
// trace the same run writes: a tiny lock-step run of two recipes, in-process, capturing
// every step with block maps every other step, served on a Unix socket with a client
// attached before the first step. Every scaling, operand, block-map and op record the
// client receives equals, field by field, the file's record with the same key, and
// neither side has a record the other lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>

#include "engine/train_config.h"
#include "engine/trainer.h"
#include "live_control.h"
#include "live_test_util.h"
#include "run_recording.h"
#include "trace_reader.h"
#include "support/cpu_engine.h"

namespace fp8scope::live::test {
namespace {

using fp8scope::testing::CpuModel;
using fp8scope::testing::CpuTrainer;

constexpr std::int64_t kSteps = 4;

using OperandId = std::tuple<std::int32_t, std::int64_t, std::int32_t, Gemm, Operand>;
OperandId id_of(const trace::OperandKey& k) { return {k.run, k.step, k.linear, k.gemm, k.operand}; }

auto op_order(const trace::OpRecord& r) {
    return std::tuple(r.run, r.step, r.start_ns, r.end_ns, r.op, r.linear, r.layer, r.device, r.stream);
}

// Records of one run in step order (ops: also by start time, as runs may interleave).
template <class T, class Order>
std::vector<T> of_run(const std::vector<T>& all, int run, Order order) {
    std::vector<T> out;
    std::copy_if(all.begin(), all.end(), std::back_inserter(out), [run](const T& r) { return r.run == run; });
    std::stable_sort(out.begin(), out.end(), [&](const T& a, const T& b) { return order(a) < order(b); });
    return out;
}

TEST(LivePublisher, CaptureRecordsOnTheStreamEqualTheTraceFile) {
    TempDir dir;
    TrainConfig config = load_train_config(std::string(FP8SCOPE_CONFIGS) + "/tiny.json");
    apply_overrides(config,
                    {"steps=" + std::to_string(kSteps), "capture_every=1", "threads=1", "compare=baseline,delayed"});
    trace::RecordingOptions options;
    options.out = dir / "run.h5";
    CpuTrainer trainer(config);
    const trace::TraceMeta meta = trace::run_trace_meta(config, trainer, "test", 2);
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", meta,
                      [&](const Command& c) { return apply_command(trainer, c); });
    trace::RunRecording recording(options, meta, trainer, &server);

    Collected got;
    LiveClient client(server.endpoint(), "", got.handlers());
    const TrainSummary summary = trainer.run();
    ASSERT_EQ(summary.steps, kSteps);
    recording.finish(summary.steps, "done");
    ASSERT_TRUE(got.wait([&] { return !got.events.empty() && got.events.back().kind == trace::EventKind::End; }));
    client.close();

    trace::TraceReader file(options.out);
    std::lock_guard lock(got.mu);
    ASSERT_EQ(got.meta.size(), 1u);
    expect_same(got.meta[0], file.meta());
    EXPECT_EQ(got.meta[0].blockmap_every, 2);
    EXPECT_TRUE(got.op_names.empty());  // the CPU engine's op names are all in the table

    std::size_t file_operands = 0, file_blockmaps = 0, file_ops = 0;
    std::map<OperandId, const trace::OperandRecord*> streamed;
    for (const auto& o : got.operands) EXPECT_TRUE(streamed.emplace(id_of(o.key), &o).second);
    std::map<std::tuple<OperandId, std::int32_t>, const trace::BlockMapRecord*> streamed_maps;
    for (const auto& b : got.blockmaps)
        EXPECT_TRUE(streamed_maps.emplace(std::tuple(id_of(b.key), b.quantizer), &b).second);

    for (int run = 0; run < 2; ++run) {
        SCOPED_TRACE("run " + std::to_string(run));
        const auto scaling = file.scaling(run, 1, kSteps);
        const auto live_scaling = of_run(got.scaling, run, [](const auto& r) { return r.step; });
        ASSERT_EQ(scaling.size(), static_cast<std::size_t>(kSteps));
        ASSERT_EQ(live_scaling.size(), scaling.size());
        for (std::size_t i = 0; i < scaling.size(); ++i) expect_same(live_scaling[i], scaling[i]);

        const auto steps = file.capture_steps(run);
        ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
        EXPECT_EQ(file.blockmap_steps(run), (std::vector<std::int64_t>{1, 3}));
        for (std::int64_t step : steps) {
            const auto operands = file.operands(run, step);
            ASSERT_FALSE(operands.empty());
            for (const auto& o : operands) {
                ++file_operands;
                auto it = streamed.find(id_of(o.key));
                ASSERT_NE(it, streamed.end()) << "step " << step << " linear " << o.key.linear;
                expect_same(trace::testing::as_stored(*it->second), o);  // the file holds bfloat16
                for (const auto& b : file.blockmaps(o.key)) {
                    ++file_blockmaps;
                    auto m = streamed_maps.find(std::tuple(id_of(b.key), b.quantizer));
                    ASSERT_NE(m, streamed_maps.end()) << "step " << step << " quantizer " << b.quantizer;
                    expect_same(trace::testing::as_stored(*m->second), b);
                }
            }
        }

        const auto ops = of_run(file.ops(run, 0, std::numeric_limits<std::int64_t>::max()), run, op_order);
        const auto live_ops = of_run(got.ops, run, op_order);
        ASSERT_FALSE(ops.empty());
        ASSERT_EQ(live_ops.size(), ops.size());
        for (std::size_t i = 0; i < ops.size(); ++i) expect_same(live_ops[i], ops[i]);
        file_ops += ops.size();
    }
    EXPECT_EQ(got.operands.size(), file_operands);
    EXPECT_GT(file_blockmaps, 0u);
    EXPECT_EQ(got.blockmaps.size(), file_blockmaps);
    EXPECT_EQ(got.ops.size(), file_ops);
}

}  // namespace
}  // namespace fp8scope::live::test
