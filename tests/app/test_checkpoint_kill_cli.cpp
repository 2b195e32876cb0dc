// A checkpoint is whole or absent: `fp8scope-engine train` writing one every step is
// killed with SIGKILL at random moments; after each kill every checkpoint file left loads
// and verifies (its CRC-32), the temporaries of the killed writer are never listed, and
// `--resume DIR` (its newest checkpoint) trains the rest of the run to the same losses, bit
// for bit, as the run that was never interrupted (the oracle).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "app/run_engine.h"
#include "engine/checkpoint.h"

namespace fs = std::filesystem;
using nlohmann::json;

extern char** environ;

namespace {

const fs::path kConfigs = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";
constexpr int kSteps = 24;

std::vector<std::string> train_args(const fs::path& dir) {
    return {"train", "--config", (kConfigs / "tiny.json").string(), "--threads", "1", "--steps", std::to_string(kSteps),
            "--set", "eval.every=0", "--checkpoint-dir", dir.string(), "--checkpoint-every", "1", "--json", "--quiet"};
}

// The engine started with `args`, its output thrown away; its pid.
pid_t spawn_engine(const std::vector<std::string>& args) {
    std::vector<char*> argv{const_cast<char*>(FP8SCOPE_ENGINE)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&files, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, FP8SCOPE_ENGINE, &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    return rc == 0 ? pid : -1;
}

}  // namespace

TEST(CheckpointKill, EveryCheckpointLeftIsWholeAndResumingTheNewestGivesTheSameLosses) {
    const fs::path scratch = fp8scope::testing::scratch_dir("fp8scope_checkpoint_kill");
    const fs::path oracle_dir = scratch / "oracle";
    fs::remove_all(oracle_dir);
    const auto t0 = std::chrono::steady_clock::now();
    const fp8scope::testing::EngineResult oracle = fp8scope::testing::run_engine(train_args(oracle_dir), scratch);
    const double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_EQ(oracle.status, 0) << oracle.err;
    const json losses = json::parse(oracle.out)["runs"][0]["losses"];
    ASSERT_EQ(losses.size(), std::size_t(kSteps));

    std::mt19937 rng(20261202);
    std::uniform_real_distribution<double> moment(0.0, run_s);
    int resumed = 0, torn_temporaries = 0;
    for (int kill = 0; kill < 12; ++kill) {
        const fs::path dir = scratch / ("kill" + std::to_string(kill));
        fs::remove_all(dir);
        double at = moment(rng);
        const pid_t pid = spawn_engine(train_args(dir));
        ASSERT_GT(pid, 0);
        if (kill % 2) {  // every other kill falls just after a checkpoint of the run's first half
            const std::string first = "step_" + std::to_string(1 + kill / 2 % (kSteps / 2)) + ".ckpt";
            const auto start = std::chrono::steady_clock::now();
            while (!fs::exists(dir / first) && std::chrono::steady_clock::now() - start < std::chrono::seconds(20))
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            at = std::uniform_real_distribution<double>(0.0, 2e-3)(rng);  // inside the next step or its write
        }
        std::this_thread::sleep_for(std::chrono::duration<double>(at));
        ::kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        SCOPED_TRACE("killed after " + std::to_string(at) + " s");

        // Every file is a whole checkpoint or a temporary of the killed writer, never listed.
        std::vector<std::string> files;
        if (fs::exists(dir))
            for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename().string());
        const std::vector<std::string> listed = fp8scope::list_checkpoints(dir.string());
        std::int64_t last_step = -1;
        for (const std::string& path : listed) {
            fp8scope::TrainState s;
            ASSERT_NO_THROW(s = fp8scope::load_checkpoint(path)) << path;
            EXPECT_EQ(fs::path(path).filename().string(), "step_" + std::to_string(s.step) + ".ckpt");
            EXPECT_GT(s.step, last_step);  // listed by step
            last_step = s.step;
        }
        for (const std::string& name : files) {
            if (name.find(".ckpt.tmp.") != std::string::npos) {
                EXPECT_EQ(name.substr(name.rfind('.') + 1), std::to_string(pid));
                ++torn_temporaries;
            } else {
                EXPECT_EQ(fs::path(name).extension(), ".ckpt") << name;
            }
        }
        if (fs::exists(dir)) {  // listing removed the dead writer's temporaries
            for (const auto& e : fs::directory_iterator(dir)) {
                EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
            }
        }
        if (listed.empty() || last_step == kSteps) continue;  // killed before the first checkpoint, or after the last

        // The newest resumes the same run.
        const fp8scope::testing::EngineResult rest =
            fp8scope::testing::run_engine({"train", "--resume", dir.string(), "--threads", "1", "--json", "--quiet"}, scratch);
        ASSERT_EQ(rest.status, 0) << rest.err;
        json tail = json::array();
        for (std::int64_t i = last_step; i < kSteps; ++i) tail.push_back(losses[std::size_t(i)]);
        EXPECT_EQ(json::parse(rest.out)["runs"][0]["losses"], tail);
        ++resumed;
    }
    std::printf("%d kills: %d resumed, %d temporaries of a killed writer found\n", 12, resumed, torn_temporaries);
    EXPECT_GE(resumed, 6);  // every other kill falls after a checkpoint of the first half
    fs::remove_all(scratch);
}
