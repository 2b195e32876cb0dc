// `fp8scope-engine train --nproc-per-node 2` as a user runs it on one machine: two engine
// processes train as one process with twice the batch, each writes its trace, and a rank
// killed mid-run ends the job with a message naming it; the last checkpoint resumes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>

#include "app/run_engine.h"
#include "comm/rendezvous.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kConfigs = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";

fs::path scratch() { return fp8scope::testing::scratch_dir("fp8scope_train_dp_cli"); }

fp8scope::testing::EngineResult train(const std::string& args) {
    return fp8scope::testing::run_engine("train --config " + (kConfigs / "tiny.json").string() +
                                             " --threads 1 --steps 8 --eval-every 4 --json " + args,
                                         scratch());
}

TEST(TrainDataParallelCli, TwoRanksTrainAsOneProcessWithTwiceTheBatch) {
    const fs::path out = scratch() / "dp.h5";
    fs::remove(out);
    fs::remove(scratch() / "dp.rank1.h5");
    const auto two = train("--batch 4 --recipe delayed --nproc-per-node 2 --out " + out.string());
    ASSERT_EQ(two.status, 0) << two.err;
    const auto one = train("--batch 8 --recipe delayed");
    ASSERT_EQ(one.status, 0) << one.err;
    EXPECT_NE(two.err.find("data parallel: rank 0 of 2"), std::string::npos) << two.err;
    // Rank 0 prints the job's summary, once.
    const json a = json::parse(two.out), b = json::parse(one.out);
    const json& la = a["runs"][0]["losses"];
    const json& lb = b["runs"][0]["losses"];
    ASSERT_EQ(la.size(), 8u);
    ASSERT_EQ(lb.size(), 8u);
    EXPECT_NEAR(la[0].get<double>(), lb[0].get<double>(), 1e-5 * lb[0].get<double>());
    for (std::size_t i = 1; i < 8; ++i) EXPECT_NEAR(la[i].get<double>(), lb[i].get<double>(), 2e-3 * lb[i].get<double>()) << i;
    EXPECT_NEAR(a["runs"][0]["eval_loss"].get<double>(), b["runs"][0]["eval_loss"].get<double>(), 2e-3);
    // One trace per rank, each saying which rank wrote it and that the sums were float32's.
    EXPECT_TRUE(fs::exists(out));
    EXPECT_TRUE(fs::exists(scratch() / "dp.rank1.h5"));
    for (int rank = 0; rank < 2; ++rank) {
        const fs::path trace = rank == 0 ? out : scratch() / "dp.rank1.h5";
        const auto inspect = fp8scope::testing::run_engine("inspect " + trace.string(), scratch());
        ASSERT_EQ(inspect.status, 0) << inspect.err;
        const std::string line = "data-parallel: written by rank " + std::to_string(rank) + " of 2, gradient sums in f32";
        EXPECT_NE(inspect.out.find(line), std::string::npos) << inspect.out;
    }
}

TEST(TrainDataParallelCli, CompressedGradientSumsTrainAndAnUnknownTypeIsNamed) {
    const auto f32 = train("--batch 4 --recipe delayed --nproc-per-node 2");
    ASSERT_EQ(f32.status, 0) << f32.err;
    for (const char* type : {"bf16", "e4m3", "e5m2"}) {
        const fs::path out = scratch() / (std::string("sums_") + type + ".h5");
        const auto low = train(std::string("--batch 4 --recipe delayed --nproc-per-node 2 --grad-dtype ") + type +
                               " --out " + out.string());
        ASSERT_EQ(low.status, 0) << type << ": " << low.err;
        // The trace says the type the sums travelled in.
        const auto inspect = fp8scope::testing::run_engine("inspect " + out.string(), scratch());
        EXPECT_NE(inspect.out.find(std::string("written by rank 0 of 2, gradient sums in ") + type), std::string::npos)
            << inspect.out;
        EXPECT_EQ(inspect.out.find("scaling_mismatch"), std::string::npos) << "the ranks agree: " << inspect.out;
        // Step 1 is measured: FP8 sums also against BF16 shadow sums (ranks.csv columns 9-11).
        const fs::path csv = scratch() / (std::string("sums_") + type + "_csv");
        ASSERT_EQ(fp8scope::testing::run_engine("export " + out.string() + " --csv " + csv.string(), scratch()).status, 0);
        std::ifstream ranks(csv / "ranks.csv");
        std::string header, row;
        std::getline(ranks, header);
        std::getline(ranks, row);  // step 1, rank 0
        EXPECT_EQ(header.substr(header.rfind(",grad_error,")),
                  ",grad_error,grad_snr_db,grad_underflow_pct,grad_overflow_pct");
        const std::string fp8 = row.substr(row.find(',', row.rfind(',', row.rfind(',', row.rfind(',') - 1) - 1)));
        if (std::string(type) == "bf16") {
            EXPECT_EQ(fp8, ",,,") << row;
        } else {
            const double snr = std::stod(fp8.substr(1)), overflow = std::stod(fp8.substr(fp8.rfind(',') + 1));
            EXPECT_GT(snr, 15.0) << row;  // about 28 dB for E4M3, 22 for E5M2 (docs/numerics.md)
            EXPECT_LT(snr, 40.0) << row;
            EXPECT_EQ(overflow, 0.0) << row;
        }
        const json a = json::parse(low.out)["runs"][0]["losses"];
        const json b = json::parse(f32.out)["runs"][0]["losses"];
        ASSERT_EQ(a.size(), 8u);
        // The first loss is before any update; later ones follow rounded gradients (FP8:
        // within 1% of the float32 sums' run, DataParallel.Fp8GradientSums...).
        EXPECT_EQ(a[0].get<double>(), b[0].get<double>()) << type;
        for (std::size_t i = 1; i < 8; ++i) EXPECT_NEAR(a[i].get<double>(), b[i].get<double>(), 1e-2 * b[i].get<double>());
    }
    const auto bad = train("--batch 4 --nproc-per-node 2 --grad-dtype e3m4");
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.err.find("--grad-dtype"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("e3m4"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("e4m3"), std::string::npos) << "the message lists the types: " << bad.err;
}

TEST(TrainDataParallelCli, TheConfigSetsTheJobAsItsFlagsDo) {
    // A config file's data_parallel section and blockmap_every, as --print-config shows them.
    const fs::path config = scratch() / "dp_config.json";
    {
        std::FILE* f = std::fopen(config.string().c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs(R"({"blockmap_every": 7, "data_parallel": {"grad_dtype": "bf16", "bucket_mb": 4,
                       "rank_timeout_s": 45, "straggler_steps": 5, "preflight": true}})", f);
        std::fclose(f);
    }
    const auto file = fp8scope::testing::run_engine("train --config " + config.string() + " --print-config", scratch());
    ASSERT_EQ(file.status, 0) << file.err;
    const json c = json::parse(file.out);
    EXPECT_EQ(c["blockmap_every"], 7);
    EXPECT_EQ(c["data_parallel"]["grad_dtype"], "bf16");
    EXPECT_EQ(c["data_parallel"]["bucket_mb"], 4.0);
    EXPECT_EQ(c["data_parallel"]["rank_timeout_s"], 45.0);
    EXPECT_EQ(c["data_parallel"]["straggler_steps"], 5);
    EXPECT_EQ(c["data_parallel"]["preflight"], true);
    EXPECT_EQ(c["data_parallel"]["grad_measure_every"], 100);  // the default, written out
    // Flags override the file; the old spelling of a renamed flag still works, with a notice.
    const auto flags = fp8scope::testing::run_engine("train --config " + config.string() +
                                                         " --grad-dtype e4m3 --rank-timeout 30 --blockmap-every 3 --print-config",
                                                     scratch());
    ASSERT_EQ(flags.status, 0) << flags.err;
    const json f = json::parse(flags.out);
    EXPECT_EQ(f["data_parallel"]["grad_dtype"], "e4m3");
    EXPECT_EQ(f["data_parallel"]["rank_timeout_s"], 30.0);
    EXPECT_EQ(f["blockmap_every"], 3);
    EXPECT_NE(flags.err.find("--rank-timeout is deprecated, use --rank-timeout-s"), std::string::npos) << flags.err;
    // An unknown type in the config is named with the field.
    const auto bad = fp8scope::testing::run_engine("train --set data_parallel.grad_dtype=e3m4 --print-config", scratch());
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.err.find("data_parallel.grad_dtype 'e3m4'"), std::string::npos) << bad.err;
    // And a job trains with the config's type: the trace says what the sums travelled in.
    const fs::path out = scratch() / "config_bf16.h5";
    const auto r = train("--batch 4 --nproc-per-node 2 --set data_parallel.grad_dtype=bf16 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto inspect = fp8scope::testing::run_engine("inspect " + out.string(), scratch());
    EXPECT_NE(inspect.out.find("written by rank 0 of 2, gradient sums in bf16"), std::string::npos) << inspect.out;
}

TEST(TrainDataParallelCli, ACheckpointRankZeroCannotWriteFailsTheJob) {
    const fs::path file = scratch() / "ck_is_a_file";
    std::ofstream(file) << "x";
    const auto r = train("--nproc-per-node 2 --checkpoint-dir " + file.string());
    EXPECT_EQ(r.status, 1) << r.err;
    const std::string error = json::parse(r.out)["error"];
    EXPECT_EQ(error.rfind("checkpoint " + file.string() + "/step_8.ckpt: ", 0), 0u) << error;
    EXPECT_NE(r.err.find("fp8scope-engine: error: checkpoint " + file.string()), std::string::npos) << r.err;
}

TEST(TrainDataParallelCli, ARankStartedWithOtherSettingsEndsTheJobNamingTheField) {
    // Two ranks as a launcher starts them, rank 1 with one setting changed.
    const std::pair<std::string, std::string> cases[] = {
        {"--lr 0.02", "optimizer.lr 0.02, rank 0 with 0.01"},
        {"--seed 7", "seed 7, rank 0 with 1"},
        {"--recipe delayed", "recipe \"delayed\", rank 0 with \"baseline\""},
        {"--set steps=4", "steps 4, rank 0 with 8"},
    };
    for (const auto& [flag, named] : cases) {
        const std::string env = "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(fp8scope::free_loopback_port()) +
                                " FP8SCOPE_JOB_SECRET=00112233445566778899aabbccddeeff WORLD_SIZE=2 RANK=";
        fp8scope::testing::EngineResult one;
        std::thread rank1([&, flag = flag] {
            one = fp8scope::testing::run_engine("train --config " + (kConfigs / "tiny.json").string() +
                                                    " --threads 1 --steps 8 --rank-timeout-s 20 " + flag,
                                                scratch(), env + "1");
        });
        fp8scope::testing::EngineResult zero = fp8scope::testing::run_engine(
            "train --config " + (kConfigs / "tiny.json").string() + " --threads 1 --steps 8 --rank-timeout-s 20",
            scratch(), env + "0");
        rank1.join();
        const std::string error = "rank 1 was started with " + named + " (every rank of a job trains the same settings)";
        for (const fp8scope::testing::EngineResult* r : {&zero, &one}) {
            EXPECT_EQ(r->status, 1) << flag;
            EXPECT_NE(r->err.find(error), std::string::npos) << r->err;
        }
    }
}

TEST(TrainDataParallelCli, ARankWithoutTheJobSecretStopsNamingTheVariable) {
    const auto r = fp8scope::testing::run_engine("train --config " + (kConfigs / "tiny.json").string() +
                                                     " --threads 1 --steps 2 --rank-timeout-s 5",
                                                 scratch(), "env -u FP8SCOPE_JOB_SECRET WORLD_SIZE=2 RANK=1 ");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("FP8SCOPE_JOB_SECRET is not set: every rank of a job of 2 needs the job's secret"),
              std::string::npos)
        << r.err;
}

TEST(TrainDataParallelCli, MoreCpuRanksThanCoresAreRefusedBeforeAnyRankStarts) {
    // Nine ranks where the process may run on one core: 8 is the bound there. Refused once,
    // as a usage error, by train and preflight alike, not by each of the ranks started.
    const std::string why =
        "fp8scope-engine: error: --nproc-per-node: 9 CPU ranks on this machine are past the 8 it takes: twice the "
        "cores this process may run on (1), and 8 at least\n";
    for (const std::string command : {"train --threads 1 --steps 2", "preflight"}) {
        const auto r = fp8scope::testing::run_engine(command + " --nproc-per-node 9", scratch(), "taskset -c 0");
        EXPECT_EQ(r.status, 2) << command;
        EXPECT_EQ(r.err, why) << command;
    }
}

TEST(TrainDataParallelCli, AKilledRankEndsTheJobAndTheCheckpointResumes) {
    const fs::path ckpt = scratch() / "ckpt";
    fs::remove_all(ckpt);
    const auto t0 = std::chrono::steady_clock::now();
    const auto crashed = train("--batch 2 --nproc-per-node 2 --rank-timeout-s 20 --checkpoint-dir " + ckpt.string() +
                               " --checkpoint-every 3 --inject-crash-rank 1 --inject-crash-step 5");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(crashed.status, 0);
    EXPECT_LT(seconds, 20.0) << "the lost rank is noticed at the next exchange, not at the timeout";
    EXPECT_NE(crashed.err.find("rank 1"), std::string::npos) << crashed.err;
    ASSERT_TRUE(fs::exists(ckpt / "step_3.ckpt")) << crashed.err;
    EXPECT_FALSE(fs::exists(ckpt / "step_6.ckpt"));

    const auto resumed = train("--nproc-per-node 2 --resume " + (ckpt / "step_3.ckpt").string());
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_EQ(json::parse(resumed.out)["steps"], 8);
    EXPECT_EQ(resumed.err.find("note: --resume"), std::string::npos) << resumed.err;  // the same ranks
    // ... or on another number of ranks (here three, with the same batch per rank).
    const auto three = train("--nproc-per-node 3 --resume " + (ckpt / "step_3.ckpt").string());
    ASSERT_EQ(three.status, 0) << three.err;
    EXPECT_EQ(json::parse(three.out)["steps"], 8);
    EXPECT_NE(three.err.find("data parallel: rank 0 of 3"), std::string::npos) << three.err;
    // The batch per rank is kept, so the global batch grows: said before training.
    EXPECT_NE(three.err.find("fp8scope-engine: note: --resume " + (ckpt / "step_3.ckpt").string() +
                             ": trained on 2 ranks x batch 2 = 4 rows a step, now 3 ranks x batch 4 = 12"),
              std::string::npos)
        << three.err;
}

TEST(TrainDataParallelCli, AHungRankEndsTheJobWithinTheRankTimeout) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = train("--batch 2 --nproc-per-node 2 --rank-timeout-s 3 --inject-hang-rank 1 --inject-hang-step 4");
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.status, 1);
    EXPECT_LT(seconds, 15.0);
    // Rank 0 waited for rank 1 at the step's exchange, for --rank-timeout-s, and names it.
    EXPECT_NE(r.err.find("rank 0: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("rank 1 sent nothing within the rendezvous timeout"), std::string::npos) << r.err;
}

TEST(TrainDataParallelCli, ThePreflightCheckExcludesASlowRankAndTheOthersTrain) {
    const fs::path out = scratch() / "excl.h5";
    fs::remove(out);
    // A wide margin (20 x the median) keeps a busy machine's noise out; the delay is far beyond.
    const auto r = train("--batch 2 --nproc-per-node 3 --preflight --preflight-margin 20 --exclude-slow "
                         "--inject-slow-rank 2 --inject-delay-ms 3000 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("rank 2 ("), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("leaves the job (--exclude-slow)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("data parallel: rank 0 of 2"), std::string::npos) << r.err;
    EXPECT_EQ(json::parse(r.out)["steps"], 8);
    // The findings open rank 0's trace.
    const auto inspect = fp8scope::testing::run_engine("inspect " + out.string(), scratch());
    ASSERT_EQ(inspect.status, 0) << inspect.err;
    EXPECT_NE(inspect.out.find("pre-flight: 3 ranks, GEMM 256^3 median"), std::string::npos) << inspect.out;
    EXPECT_NE(inspect.out.find("pre-flight: rank 2 ("), std::string::npos) << inspect.out;
    EXPECT_NE(inspect.out.find("; excluded"), std::string::npos) << inspect.out;
    EXPECT_NE(inspect.out.find("pre-flight: all-reduce of 4 MiB in"), std::string::npos) << inspect.out;
    EXPECT_FALSE(fs::exists(scratch() / "excl.rank2.h5"));
    EXPECT_TRUE(fs::exists(scratch() / "excl.rank1.h5"));
}

TEST(TrainDataParallelCli, AJobLeftWithOneRankStillRecordsThePreflightFindings) {
    const fs::path out = scratch() / "alone.h5";
    fs::remove(out);
    // Two ranks: the median is their mean, so the slow one is at most twice it; margin 0.5.
    const auto r = train("--batch 2 --nproc-per-node 2 --preflight --preflight-margin 0.5 --exclude-slow "
                         "--inject-slow-rank 1 --inject-delay-ms 3000 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto inspect = fp8scope::testing::run_engine("inspect " + out.string(), scratch());
    EXPECT_NE(inspect.out.find("pre-flight: rank 1 ("), std::string::npos) << inspect.out;
    EXPECT_NE(inspect.out.find("; excluded"), std::string::npos) << inspect.out;
}

}  // namespace
