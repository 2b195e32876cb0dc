// Damaged and foreign files: the reader answers with a TraceError that names the file and
// the problem, and never crashes, whatever part of the file is damaged.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "capture/read_everything.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

std::string write_good(const TempDir& dir) {
    std::string path = dir.file("good.h5");
    TraceMeta m = sample_meta();
    TraceWriter w(path, m);
    for (std::int64_t s = 0; s < 12; ++s) {
        for (int run = 0; run < 2; ++run) {
            w.write(sample_step(run, s));
            w.write(sample_scaling(m, run, s));
            if (s % 5 == 0) {
                w.write(sample_operand(m, {run, s, 0, Gemm::Fprop, Operand::X}));
                w.write(sample_operand(m, {run, s, 1, Gemm::Wgrad, Operand::DY}));
                w.write(sample_blockmap({run, s, 0, Gemm::Fprop, Operand::X}, 1));
            }
            w.write(sample_op(run, s, 1));
        }
    }
    w.write(sample_event(0, 3, EventKind::Pause));
    w.close();
    return path;
}

std::vector<char> bytes_of(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), {}};
}
void put_bytes(const std::string& path, const char* data, std::size_t n) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(data, static_cast<std::streamsize>(n));
}

// Opens and reads everything, whole and as a large trace; true when it all worked, false
// on a TraceError. Any other exception fails the test.
bool read_everything(const std::string& path) {
    try {
        read_everything_of(path);
        read_everything_of(path, SIZE_MAX, {.min_step_rows = 1, .tail_steps = 2});
        return true;
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "the message names the file";
        return false;
    }
}

std::string error_of(const std::string& path) {
    try {
        TraceReader r(path);
    } catch (const TraceError& e) {
        return e.what();
    }
    return "";
}

TEST(TraceDamage, TheGoodFileReads) {
    TempDir dir;
    EXPECT_TRUE(read_everything(write_good(dir)));
}

TEST(TraceDamage, TruncatedFilesAreRejected) {
    TempDir dir;
    auto good = bytes_of(write_good(dir));
    std::string bad = dir.file("truncated.h5");
    std::vector<std::size_t> cuts = {0, 1, 7, 8, 9, 40, 47, 48, 96, 200, 511, 512, 1024, 2048};
    for (int i = 1; i < 64; ++i) cuts.push_back(good.size() * i / 64);
    cuts.push_back(good.size() - 1);
    for (std::size_t cut : cuts) {
        if (cut >= good.size()) continue;
        SCOPED_TRACE("truncated at " + std::to_string(cut) + " of " + std::to_string(good.size()));
        put_bytes(bad, good.data(), cut);
        EXPECT_FALSE(read_everything(bad));
    }
}

TEST(TraceDamage, FlippedBytesNeverCrash) {
    TempDir dir;
    auto good = bytes_of(write_good(dir));
    std::string bad = dir.file("flipped.h5");
    int rejected = 0, tried = 0;
    for (std::size_t pos = 0; pos < good.size(); pos += 1 + good.size() / 250) {
        SCOPED_TRACE("byte " + std::to_string(pos) + " flipped");
        auto copy = good;
        copy[pos] = static_cast<char>(~copy[pos]);
        put_bytes(bad, copy.data(), copy.size());
        if (!read_everything(bad)) ++rejected;
        ++tried;
    }
    // Metadata is checksummed: flipping the superblock or an object header is caught.
    auto copy = good;
    copy[20] = static_cast<char>(~copy[20]);  // inside the superblock
    put_bytes(bad, copy.data(), copy.size());
    EXPECT_FALSE(read_everything(bad));
    EXPECT_GT(rejected, 0) << tried;
}

TEST(TraceDamage, APlainHdf5FileIsNotATrace) {
    TempDir dir;
    std::string path = dir.file("plain.h5");
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 4;
    hid_t space = H5Screate_simple(1, &n, nullptr);
    hid_t d = H5Dcreate2(f, "data", H5T_NATIVE_INT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
    std::string e = error_of(path);
    EXPECT_NE(e.find("not an fp8scope trace"), std::string::npos) << e;
}

TEST(TraceDamage, AForeignFormatAttributeIsNamed) {
    TempDir dir;
    std::string path = dir.file("other.h5");
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 9);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(f, "format", t, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, "nexus-xyz");
    H5Aclose(a);
    H5Sclose(space);
    H5Tclose(t);
    H5Fclose(f);
    std::string e = error_of(path);
    EXPECT_NE(e.find("format attribute is 'nexus-xyz'"), std::string::npos) << e;
}

TEST(TraceDamage, ANewerFormatVersionIsRejected) {
    TempDir dir;
    std::string path = write_good(dir);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    std::int64_t v = kFormatVersion + 1;
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Fclose(f);
    std::string e = error_of(path);
    EXPECT_NE(e.find("format_version " + std::to_string(kFormatVersion + 1) + " is newer"), std::string::npos) << e;
}

TEST(TraceDamage, AMissingDatasetIsNamed) {
    TempDir dir;
    std::string path = write_good(dir);
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    H5Ldelete(f, "/operands/top", H5P_DEFAULT);
    H5Fclose(f);
    std::string e = error_of(path);
    EXPECT_NE(e.find("missing dataset /operands/top"), std::string::npos) << e;
}

TEST(TraceDamage, NotHdf5MissingAndEmptyFiles) {
    TempDir dir;
    std::string text = dir.file("notes.h5");
    put_bytes(text, "just some text, not HDF5\n", 25);
    EXPECT_NE(error_of(text).find("not an HDF5 file"), std::string::npos) << error_of(text);
    std::string empty = dir.file("empty.h5");
    put_bytes(empty, "", 0);
    EXPECT_NE(error_of(empty).find("not an HDF5 file"), std::string::npos) << error_of(empty);
    EXPECT_NE(error_of(dir.file("absent.h5")).find("no such file"), std::string::npos);
    EXPECT_NE(error_of(dir.path()).find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace fp8scope::trace
