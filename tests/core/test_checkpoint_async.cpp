// Asynchronous checkpoints: a file written from arrays where they lie (a host snapshot) is
// byte for byte the file of the same state held in vectors; the writer thread writes from
// a snapshot and refuses a NaN in it; the newest checkpoint that verifies is found past a
// corrupt one (the listing: test_checkpoint_hardening.cpp); and a trainer's
// checkpoint of every step holds exactly that step's state.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "engine/checkpoint.h"
#include "engine/checkpoint_writer.h"
#include "support/cpu_engine.h"
#include "support/tiny_config.h"

using namespace fp8scope;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
    fs::path d = fs::temp_directory_path() / ("fp8scope_ckpt_async_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

TrainState two_runs() {
    TrainState s;
    s.config_json = "{\"steps\": 3}";
    s.step = 7;
    s.next_batch = 9;
    s.skipped_batches = {4};
    s.world_size = 2;
    for (int r = 0; r < 2; ++r) {
        RunState rep;
        rep.recipe = r ? "current" : "baseline";
        for (int i = 0; i < 300 + r; ++i) {
            rep.params.push_back(0.01f * float(i) - float(r));
            rep.m.push_back(-1e-4f * float(i));
            rep.v.push_back(1e-6f * float(i + r));
        }
        rep.adam_steps = 7;
        rep.recipe_state = {9, 8, std::uint8_t(r)};
        rep.recent_losses = {4.0f, 3.5f};
        s.runs.push_back(rep);
    }
    return s;
}

std::string bytes_of(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(CheckpointAsync, ArraysWhereTheyLieMakeTheSameFileAsTheStatesVectors) {
    const fs::path dir = temp_dir("same");
    const TrainState full = two_runs();
    TrainState meta = full;
    std::vector<RunArrays> arrays;
    for (const RunState& r : full.runs) arrays.push_back({r.params, r.m, r.v});
    for (RunState& r : meta.runs) r.params.clear(), r.m.clear(), r.v.clear();
    save_checkpoint((dir / "a.ckpt").string(), meta, arrays);
    const std::vector<std::uint8_t> oracle = serialize_checkpoint(full);
    EXPECT_EQ(bytes_of(dir / "a.ckpt"), std::string(oracle.begin(), oracle.end()));
    EXPECT_THROW(save_checkpoint((dir / "b.ckpt").string(), meta, std::span(arrays).first(1)), std::invalid_argument);
    fs::remove_all(dir);
}

TEST(CheckpointAsync, TheWriterWritesFromAHostSnapshotAndSkipsANaNInIt) {
    const fs::path dir = temp_dir("writer");
    CpuBackend cpu(1);
    const TrainState full = two_runs();
    std::vector<DeviceBuffer<float>> device;
    std::vector<HostSnapshot::Region> regions;
    std::vector<std::size_t> sizes;
    for (const RunState& r : full.runs) {
        for (const std::vector<float>* a : {&r.params, &r.m, &r.v}) {
            device.emplace_back(cpu, a->size());
            cpu.copy_from_host(device.back().data(), a->data(), a->size() * sizeof(float));
            regions.push_back({device.back().data(), a->size() * sizeof(float)});
        }
        sizes.push_back(r.params.size());
    }
    TrainState meta = full;
    for (RunState& r : meta.runs) r.params.clear(), r.m.clear(), r.v.clear();
    auto snapshot = cpu.make_host_snapshot();
    CheckpointWriter writer;
    snapshot->start(regions);
    cpu.fill_zero(device[0].data(), 4 * sizeof(float));  // after start(): not in the file
    writer.write((dir / "good.ckpt").string(), meta, *snapshot, sizes);
    writer.wait();
    const std::vector<std::uint8_t> oracle = serialize_checkpoint(full);
    EXPECT_EQ(bytes_of(dir / "good.ckpt"), std::string(oracle.begin(), oracle.end()));

    device[4].data()[17] = std::numeric_limits<float>::quiet_NaN();  // run 1's m
    snapshot->start(regions);
    writer.write((dir / "bad.ckpt").string(), meta, *snapshot, sizes);
    writer.wait();
    const std::vector<CheckpointWriter::Done> done = writer.finished();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].skipped, "");
    EXPECT_EQ(done[0].error, "");
    EXPECT_EQ(done[1].skipped, "run 1's AdamW m: a NaN/Inf (first at 17)");
    // The phases in their order, inside the whole write's time.
    const CheckpointWriter::Done& d = done[0];
    EXPECT_LE(0.0, d.landed);
    EXPECT_LE(d.landed, d.checked);
    EXPECT_LE(d.checked + d.times.crc + d.times.write + d.times.flush, d.seconds);
    EXPECT_EQ(d.timing().rfind("host copy landed at ", 0), 0u) << d.timing();
    EXPECT_FALSE(fs::exists(dir / "bad.ckpt"));
    fs::remove_all(dir);
}

// Checked in parts on several threads, the first NaN/Inf in (run, array, index) order is
// the one named, whichever part finishes first.
TEST(CheckpointAsync, TheFirstNonFiniteValueIsNamedWhateverThePartsOrder) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    std::vector<std::vector<float>> a(6, std::vector<float>(1000, 0.5f));  // run r: params, m, v at 3r..3r+2
    auto runs = [&] {
        return std::vector<RunArrays>{{a[0], a[1], a[2]}, {a[3], a[4], a[5]}};
    };
    for (std::size_t part : {std::size_t(7), std::size_t(1000), std::size_t(64) << 20}) {
        EXPECT_EQ(nonfinite_arrays(runs(), part), "") << part;
        a[3][500] = nan;
        EXPECT_EQ(nonfinite_arrays(runs(), part), "run 1's parameters: a NaN/Inf (first at 500)") << part;
        a[2][999] = -inf;
        EXPECT_EQ(nonfinite_arrays(runs(), part), "run 0's AdamW v: a NaN/Inf (first at 999)") << part;
        a[2][6] = inf;
        EXPECT_EQ(nonfinite_arrays(runs(), part), "run 0's AdamW v: a NaN/Inf (first at 6)") << part;
        a[1][7] = nan;
        EXPECT_EQ(nonfinite_arrays(runs(), part), "run 0's AdamW m: a NaN/Inf (first at 7)") << part;
        for (auto& v : a) std::fill(v.begin(), v.end(), 0.5f);
    }
}

// A write that fails part way (here the file size limit: EFBIG) is an error naming the
// file, and leaves neither the checkpoint nor its temporary.
TEST(CheckpointAsync, AFailedWriteLeavesNoFile) {
    const fs::path dir = temp_dir("efbig");
    TrainState s = two_runs();
    for (RunState& r : s.runs) r.params.resize(20000, 0.25f), r.m.resize(20000), r.v.resize(20000);
    rlimit was{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &was), 0);
    rlimit small = was;
    small.rlim_cur = 64 << 10;  // the state is ~480 KB
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    std::string error;
    try {
        save_checkpoint((dir / "big.ckpt").string(), s);
    } catch (const std::exception& e) {
        error = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &was);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_NE(error.find("cannot write checkpoint"), std::string::npos) << error;
    EXPECT_NE(error.find((dir / "big.ckpt.tmp.").string()), std::string::npos) << error;
    EXPECT_TRUE(fs::is_empty(dir));
    save_checkpoint((dir / "big.ckpt").string(), s);  // the limit gone, it is written whole
    const TrainState back = load_checkpoint((dir / "big.ckpt").string());
    EXPECT_EQ(back.runs.at(1).params, s.runs[1].params);
    fs::remove_all(dir);
}

TEST(CheckpointAsync, TheNewestThatVerifiesIsFoundPastACorruptOne) {
    const fs::path dir = temp_dir("newest");
    TrainState s = two_runs();
    for (int step : {1, 2, 3}) {
        s.step = step;
        save_checkpoint((dir / ("step_" + std::to_string(step) + ".ckpt")).string(), s);
    }
    {  // a bit flipped in step 3's last run
        std::fstream f(dir / "step_3.ckpt", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-20, std::ios::end);
        f.put('\x7f');
    }
    const NewestCheckpoint newest = newest_checkpoint(dir.string());
    EXPECT_EQ(newest.path, (dir / "step_2.ckpt").string());
    EXPECT_EQ(newest.state.step, 2);
    ASSERT_EQ(newest.refused.size(), 1u);
    EXPECT_EQ(newest.refused[0], (dir / "step_3.ckpt").string() + ": checkpoint checksum mismatch: the file is corrupt");

    const fs::path empty = temp_dir("empty");
    try {
        newest_checkpoint(empty.string());
        ADD_FAILURE() << "no checkpoint, no throw";
    } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), empty.string() + ": no checkpoint that loads (no *.ckpt file)");
    }
    fs::remove_all(dir);
    fs::remove_all(empty);
}

// The oracle: a trainer of the same config without checkpoints, its state() after each step.
TEST(CheckpointAsync, ACheckpointOfEveryStepHoldsThatStepsState) {
    const fs::path dir = temp_dir("trainer");
    TrainConfig c = fp8scope::testing::tiny_config(6);
    c.threads = 2;
    c.compare = {"baseline", "current"};
    TrainConfig with = c;
    with.checkpoint.dir = dir.string();
    with.checkpoint.every = 1;
    fp8scope::testing::CpuTrainer writing(with), plain(c);
    const TrainSummary done = writing.run();
    ASSERT_EQ(done.error, "");
    for (int step = 1; step <= 6; ++step) {
        plain.step();
        const TrainState want = plain.state();
        const TrainState got = load_checkpoint((dir / ("step_" + std::to_string(step) + ".ckpt")).string());
        ASSERT_EQ(got.step, step);
        ASSERT_EQ(got.runs.size(), 2u);
        for (std::size_t r = 0; r < 2; ++r) {
            EXPECT_EQ(got.runs[r].params, want.runs[r].params) << "step " << step << " run " << r;
            EXPECT_EQ(got.runs[r].m, want.runs[r].m) << "step " << step << " run " << r;
            EXPECT_EQ(got.runs[r].v, want.runs[r].v) << "step " << step << " run " << r;
            EXPECT_EQ(got.runs[r].recipe_state, want.runs[r].recipe_state) << "step " << step << " run " << r;
        }
    }
    fs::remove_all(dir);
}

// Oracle: zlib's CRC-32 of the concatenation in one pass (whose check value
// test_checkpoint.cpp pins), for cuts at and across every piece boundary.
TEST(CheckpointAsync, TheCrcOfPiecesCutIntoPartsIsTheCrcOfTheirConcatenation) {
    std::vector<std::vector<std::uint8_t>> pieces = {{}, {1}, std::vector<std::uint8_t>(1000), std::vector<std::uint8_t>(4097),
                                                     std::vector<std::uint8_t>(65539)};
    std::vector<std::uint8_t> all;
    std::uint32_t x = 12345;
    for (auto& p : pieces)
        for (auto& b : p) b = std::uint8_t((x = x * 1103515245u + 12345u) >> 24);
    std::vector<std::span<const std::uint8_t>> spans;
    for (const auto& p : pieces) {
        spans.emplace_back(p);
        all.insert(all.end(), p.begin(), p.end());
    }
    const std::uint32_t oracle = crc32(all);
    for (std::size_t part : {std::size_t(1), std::size_t(7), std::size_t(1000), std::size_t(4096), std::size_t(1) << 28})
        EXPECT_EQ(crc32_pieces(spans, part), oracle) << "parts of " << part << " bytes";
    const std::string digits = "123456789";
    const std::vector<std::uint8_t> a(digits.begin(), digits.begin() + 4), b(digits.begin() + 4, digits.end());
    const std::vector<std::span<const std::uint8_t>> check = {a, {}, b};
    EXPECT_EQ(crc32_pieces(check, 2), 0xCBF43926u);  // CRC-32's check value
}
