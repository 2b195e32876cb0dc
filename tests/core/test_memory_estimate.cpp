// The memory estimate (issue 13, defect 7): it agrees with the model's own layout on
// ordinary configs, and a config inside the field limits that needs terabytes is refused
// by the Trainer before anything is allocated, naming the fields that drive it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/memory_estimate.h"
#include "engine/model_impl.h"
#include "support/cpu_engine.h"
#include "support/error_of.h"

using namespace fp8scope;
using fp8scope::testing::error_of;

namespace {

}  // namespace

TEST(MemoryEstimate, MatchesTheModelLayout) {
    for (int variant = 0; variant < 3; ++variant) {
        TrainConfig c;
        c.batch_size = 3;
        c.seq_len = 17;
        if (variant == 1) c.model.mlp = MlpKind::SwiGLU, c.model.norm = NormKind::RMSNorm;
        if (variant == 2) c.model.vocab_size = 300, c.model.n_layer = 2, c.model.n_head = 8;
        SCOPED_TRACE(variant);
        ParameterTensors p{};
        ActivationTensors a{};
        const double P = double(carve_params(c.model, nullptr, p, nullptr));
        const std::int64_t att = std::int64_t(c.batch_size) * c.model.n_head * c.seq_len * c.seq_len;
        const ActivationSizes n = carve_activations(c.model, c.batch_size, c.seq_len, att, ActPtr{nullptr, DType::F32},
                                                    nullptr, a);
        const MemoryEstimate e = estimate_memory(c, 4);
        EXPECT_EQ(e.params, P * 4);
        EXPECT_EQ(e.activations, double(n.acts) * 4 + double(n.stats) * 4 + 2.0 * c.batch_size * c.seq_len * 4);
        EXPECT_EQ(estimate_memory(c, 2).activations, double(n.acts) * 2 + double(n.stats) * 4 + 2.0 * c.batch_size * c.seq_len * 4);
        EXPECT_EQ(e.operand_copies, 0) << "baseline casts nothing";
        c.compare = {"baseline", "delayed"};
        const MemoryEstimate two = estimate_memory(c, 4);
        EXPECT_EQ(two.params, 2 * e.params);
        EXPECT_GT(two.operand_copies, 0);
    }
}

TEST(MemoryEstimate, TheTrainerRefusesAConfigNoMachineHolds) {
    TrainConfig c;  // inside every field limit: attention alone is B x NH x T^2 x L floats
    c.batch_size = 1 << 20;
    c.seq_len = 1 << 12;
    c.model.max_seq = 1 << 12;
    const std::string m = error_of([&] { fp8scope::testing::CpuTrainer t(c); });
    FP8SCOPE_EXPECT_CONTAINS(m, "the config needs about ");
    FP8SCOPE_EXPECT_CONTAINS(m, " available (");
    FP8SCOPE_EXPECT_CONTAINS(m, "activations of a step");
    FP8SCOPE_EXPECT_CONTAINS(m, "batch_size 1048576, seq_len 4096");
}

TEST(MemoryEstimate, TheMessageNamesTheFiguresAndTheFields) {
    TrainConfig c;
    c.eval.batches = 60000;
    const MemoryEstimate e = estimate_memory(c, 2);
    EXPECT_NO_THROW(require_memory(e, {e.total(), "test"}, false));
    const std::string all = error_of([&] { require_memory(e, {1000, "test figure"}, false); });
    FP8SCOPE_EXPECT_CONTAINS(all, "this machine has 1 KB available (test figure)");
    // On a GPU only host memory is compared, and the host part that drives it is named.
    const std::string host = error_of([&] { require_memory(e, {1000, "test figure"}, true); });
    FP8SCOPE_EXPECT_CONTAINS(host, "of host memory");
    FP8SCOPE_EXPECT_CONTAINS(host, "evaluation batches");
    FP8SCOPE_EXPECT_CONTAINS(host, "eval.batches 60000");
}

TEST(MemoryEstimate, RanksOnOneMachineAreComparedTogether) {
    TrainConfig c;
    const MemoryEstimate e = estimate_memory(c, 4);
    const AvailableMemory room{e.total() * 3.5, "test figure"};
    EXPECT_NO_THROW(require_memory(e, room, false, 3));
    const std::string four = error_of([&] { require_memory(e, room, false, 4); });
    FP8SCOPE_EXPECT_CONTAINS(four, "the 4 ranks on this machine need about " + format_bytes(4 * e.total()) + " (" +
                                       format_bytes(e.total()) + " each) of memory");
}

TEST(MemoryEstimate, ReadsTheLimitOfCgroupV2ThenV1) {
    const std::filesystem::path root = std::filesystem::temp_directory_path() / "fp8scope_cgroup_test";
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root / "memory");
    const auto write = [&](const char* name, const char* text) { std::ofstream(root / name) << text; };
    EXPECT_FALSE(cgroup_memory(root).has_value());  // no files: no cgroup figure
    write("memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1 without a limit
    write("memory/memory.usage_in_bytes", "1000\n");
    EXPECT_FALSE(cgroup_memory(root).has_value());
    write("memory/memory.limit_in_bytes", "4000000000\n");
    auto v1 = cgroup_memory(root);
    ASSERT_TRUE(v1.has_value());
    EXPECT_EQ(v1->bytes, 4000000000.0 - 1000);
    EXPECT_EQ(v1->source, "the cgroup's memory/memory.limit_in_bytes");
    write("memory.max", "max\n");  // v2 without a limit: v1's figure stands
    write("memory.current", "5\n");
    EXPECT_EQ(cgroup_memory(root)->bytes, 4000000000.0 - 1000);
    write("memory.max", "2000\n");
    EXPECT_EQ(cgroup_memory(root)->bytes, 1995.0);
    EXPECT_EQ(cgroup_memory(root)->source, "the cgroup's memory.max");
    std::filesystem::remove_all(root);
}

TEST(MemoryEstimate, FormatsBytesAndReadsTheMachine) {
    EXPECT_EQ(format_bytes(512), "512 B");
    EXPECT_EQ(format_bytes(3.2e12), "3.2 TB");
    EXPECT_EQ(format_bytes(1.5e30), "1.5e+06 YB");
    const AvailableMemory have = available_memory();
    EXPECT_GT(have.bytes, 0);
    EXPECT_FALSE(have.source.empty());
}
