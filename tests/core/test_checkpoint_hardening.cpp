// Checkpoints from a crash or a hostile file (issue 13, defects 6, 9, 13): empty arrays
// round trip without memcpy from a null pointer (UBSan on every --resume), a recipe
// state whose history count exceeds its bytes is refused before anything is sized, and
// the temporaries a writer killed with -9 leaves are cleaned up by the next writer and by
// the listing, which never lists one.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/io_test_util.h"
#include "engine/checkpoint.h"
#include "engine/fp8_linear.h"
#include "fp8/training_recipe.h"
#include "cpu/cpu_backend.h"

using namespace fp8scope;
namespace fs = std::filesystem;

namespace {

// A process id that no longer exists: a child that has exited and been reaped.
pid_t dead_pid() {
    pid_t p = ::fork();
    if (p == 0) ::_exit(0);
    int st = 0;
    ::waitpid(p, &st, 0);
    return p;
}

}  // namespace

TEST(CheckpointHardening, EmptyArraysRoundTrip) {
    // A baseline run: no recipe state, no skipped batches, no losses yet.
    TrainState s;
    s.config_json = "{}";
    s.runs.push_back(RunState{"baseline", {}, {}, {}, 0, {}, {}});
    TrainState back = deserialize_checkpoint(serialize_checkpoint(s), "empty.ckpt");
    ASSERT_EQ(back.runs.size(), 1u);
    EXPECT_TRUE(back.runs[0].params.empty());
    EXPECT_TRUE(back.skipped_batches.empty());
}

TEST(CheckpointHardening, StaleTemporariesOfDeadWritersAreRemoved) {
    const fs::path dir = io_test::scratch_dir();
    const fs::path stale = dir / ("step_10.ckpt.tmp." + std::to_string(dead_pid()));
    const fs::path live = dir / ("step_20.ckpt.tmp." + std::to_string(::getpid()));
    const fs::path other = dir / "notes.tmp.1";
    for (const auto& p : {stale, live, other}) std::ofstream(p) << "partial";
    TrainState s;
    s.config_json = "{}";
    save_checkpoint((dir / "step_30.ckpt").string(), s);
    EXPECT_FALSE(fs::exists(stale)) << "a dead writer's temporary is left behind";
    EXPECT_TRUE(fs::exists(live)) << "a live writer's temporary must be kept";
    EXPECT_TRUE(fs::exists(other)) << "only NAME.ckpt.tmp.PID files are temporaries";
    EXPECT_TRUE(fs::exists(dir / "step_30.ckpt"));
}

TEST(CheckpointHardening, TheListingOrdersByStepAndNeverListsATemporary) {
    const fs::path dir = io_test::scratch_dir();
    TrainState s;
    s.config_json = "{}";
    for (const char* name : {"step_10.ckpt", "step_2.ckpt", "step_1.ckpt", "final.ckpt"})
        save_checkpoint((dir / name).string(), s);
    const fs::path stale = dir / ("step_11.ckpt.tmp." + std::to_string(dead_pid()));
    const fs::path live = dir / ("step_12.ckpt.tmp." + std::to_string(::getpid()));
    for (const fs::path& p : {stale, live, dir / "notes.txt"}) std::ofstream(p) << "partial";
    fs::create_directories(dir / "folder.ckpt");
    const std::vector<std::string> listed = list_checkpoints(dir.string());
    const std::vector<std::string> expected = {(dir / "step_1.ckpt").string(), (dir / "step_2.ckpt").string(),
                                               (dir / "step_10.ckpt").string(), (dir / "final.ckpt").string()};
    EXPECT_EQ(listed, expected);
    EXPECT_FALSE(fs::exists(stale)) << "a dead writer's temporary is removed";
    EXPECT_TRUE(fs::exists(live)) << "a live writer's is kept";
    EXPECT_TRUE(list_checkpoints((dir / "missing").string()).empty());
}

TEST(CheckpointHardening, RecipeStateHistoryCountIsCheckedAgainstItsBytes) {
    // One linear, one recipe, X present with a history count of 2^32 - 1 and no values:
    // the smallest state that used to size a 16 GiB container before the bytes check.
    std::vector<std::uint8_t> b = {'F', '8', 'R', 'S'};
    auto put = [&](auto v) {
        const std::size_t at = b.size();
        b.resize(at + sizeof v);
        std::memcpy(b.data() + at, &v, sizeof v);
    };
    put(std::uint32_t(1));  // version
    put(std::uint32_t(1));  // linears
    put(std::uint32_t(1));  // recipes
    put(std::uint32_t(7));
    b.insert(b.end(), {'d', 'e', 'l', 'a', 'y', 'e', 'd'});
    put(std::uint8_t(1));   // X present
    put(std::uint8_t(0));   // format
    put(std::int32_t(16));  // history length limit
    put(std::uint8_t(0));   // algo
    put(std::int32_t(0));   // margin
    put(1.0f);              // scale
    put(std::uint32_t(0xFFFFFFFF));
    CpuBackend cpu(1);
    Fp8Linear lin(cpu, {LinearInfo{"l0", 0, 16, 16}});
    try {
        lin.load_state(b);
        FAIL() << "loaded a state with 2^32 - 1 history values and none present";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    }
}
