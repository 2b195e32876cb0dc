// Checkpoint files: the CRC-32 check value, a full round trip, atomic replacement, and
// the errors for corrupt, truncated and foreign files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <string>

#include "engine/checkpoint.h"

using namespace fp8scope;
namespace fs = std::filesystem;

namespace {

TrainState sample_state() {
    TrainState s;
    s.config_json = "{\"steps\": 10}";
    s.step = 42;
    s.next_batch = 45;
    s.skipped_batches = {7, 19};
    s.rewinds = 2;
    s.world_size = 3;
    for (int r = 0; r < 2; ++r) {
        RunState rep;
        rep.recipe = r ? "delayed" : "baseline";
        rep.params = {1.5f, -2.25f, 3e-8f, static_cast<float>(r)};
        rep.m = {0.1f, 0.2f, 0.3f, 0.4f};
        rep.v = {1e-3f, 2e-3f, 3e-3f, 4e-3f};
        rep.adam_steps = 42;
        rep.recipe_state = {1, 2, 3, static_cast<std::uint8_t>(r)};
        rep.recent_losses = {3.0f, 2.5f};
        s.runs.push_back(rep);
    }
    return s;
}

fs::path temp_dir(const std::string& name) {
    fs::path d = fs::temp_directory_path() / ("fp8scope_ckpt_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

std::string error_of(const std::vector<std::uint8_t>& bytes) {
    try {
        deserialize_checkpoint(bytes, "ck.bin");
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(Checkpoint, Crc32HasTheStandardCheckValue) {
    const std::string s = "123456789";  // CRC-32/ISO-HDLC check value
    EXPECT_EQ(crc32({reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}), 0xCBF43926u);
    EXPECT_EQ(crc32({}), 0u);
}

TEST(Checkpoint, RoundTripsEveryField) {
    TrainState a = sample_state();
    TrainState b = deserialize_checkpoint(serialize_checkpoint(a), "mem");
    EXPECT_EQ(b.config_json, a.config_json);
    EXPECT_EQ(b.step, 42);
    EXPECT_EQ(b.next_batch, 45u);
    EXPECT_EQ(b.skipped_batches, a.skipped_batches);
    EXPECT_EQ(b.rewinds, 2);
    EXPECT_EQ(b.world_size, 3);
    ASSERT_EQ(b.runs.size(), 2u);
    for (int r = 0; r < 2; ++r) {
        EXPECT_EQ(b.runs[r].recipe, a.runs[r].recipe);
        EXPECT_EQ(b.runs[r].params, a.runs[r].params);
        EXPECT_EQ(b.runs[r].m, a.runs[r].m);
        EXPECT_EQ(b.runs[r].v, a.runs[r].v);
        EXPECT_EQ(b.runs[r].adam_steps, 42);
        EXPECT_EQ(b.runs[r].recipe_state, a.runs[r].recipe_state);
        EXPECT_EQ(b.runs[r].recent_losses, a.runs[r].recent_losses);
    }
}

TEST(Checkpoint, AVersionOneFileLoadsWithoutItsWorldSize) {
    // Version 1 is version 2 without the payload's last field, the i32 world size.
    std::vector<std::uint8_t> v1 = serialize_checkpoint(sample_state());
    v1.resize(v1.size() - 4);
    const std::uint32_t version = 1, crc = crc32({v1.data() + 24, v1.size() - 24});
    const std::uint64_t size = v1.size() - 24;
    std::memcpy(v1.data() + 8, &version, 4);
    std::memcpy(v1.data() + 12, &size, 8);
    std::memcpy(v1.data() + 20, &crc, 4);
    const TrainState b = deserialize_checkpoint(v1, "v1");
    EXPECT_EQ(b.world_size, 0);  // not recorded
    EXPECT_EQ(b.step, 42);
    ASSERT_EQ(b.runs.size(), 2u);
    EXPECT_EQ(b.runs[1].recent_losses, sample_state().runs[1].recent_losses);
}

TEST(Checkpoint, FileRoundTripReplacesAtomicallyAndLeavesNoTemporaries) {
    fs::path dir = temp_dir("file");
    std::string path = (dir / "sub" / "run.ckpt").string();
    TrainState a = sample_state();
    save_checkpoint(path, a);
    a.step = 43;
    a.runs[0].params.assign(1000, 0.5f);
    a.runs[0].m.assign(1000, 0.0f);
    a.runs[0].v.assign(1000, 0.0f);
    save_checkpoint(path, a);  // over the old one
    TrainState b = load_checkpoint(path);
    EXPECT_EQ(b.step, 43);
    EXPECT_EQ(b.runs[0].params.size(), 1000u);
    auto files = std::distance(fs::directory_iterator(dir / "sub"), fs::directory_iterator());
    EXPECT_EQ(files, 1);
    fs::remove_all(dir);
}

TEST(Checkpoint, RejectsACorruptPayloadByChecksum) {
    auto bytes = serialize_checkpoint(sample_state());
    bytes[bytes.size() - 9] ^= 0x10;  // inside the last run's data
    std::string e = error_of(bytes);
    EXPECT_NE(e.find("ck.bin"), std::string::npos) << e;
    EXPECT_NE(e.find("checksum"), std::string::npos) << e;
}

TEST(Checkpoint, RejectsTruncatedForeignAndFutureFiles) {
    auto bytes = serialize_checkpoint(sample_state());
    auto cut = bytes;
    cut.resize(cut.size() - 100);
    EXPECT_NE(error_of(cut).find("truncated"), std::string::npos) << error_of(cut);

    auto foreign = bytes;
    foreign[0] = 'X';
    EXPECT_NE(error_of(foreign).find("bad magic"), std::string::npos);
    EXPECT_NE(error_of({1, 2, 3}).find("bad magic"), std::string::npos);

    auto future = bytes;
    future[8] = 9;  // version
    EXPECT_NE(error_of(future).find("version 9"), std::string::npos) << error_of(future);
}

TEST(Checkpoint, MissingFileNamesThePath) {
    try {
        load_checkpoint("/nonexistent/x.ckpt");
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/x.ckpt"), std::string::npos);
    }
}
