// Hostile tensor, config, data and checkpoint files (issue 13): each test is the
// smallest input that showed a defect. FIFOs and directories are refused by name instead
// of hanging or reading as empty; a .npy dimension of 2^64 + 4 no longer wraps to 4; a
// safetensors header that names a tensor twice is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "core/io_test_util.h"
#include "engine/checkpoint.h"
#include "engine/data.h"
#include "engine/train_config.h"
#include "io/input_file.h"
#include "io/py_literal.h"
#include "io/tensor_file.h"
#include "support/error_of.h"

using namespace fp8scope;
using fp8scope::testing::error_of;
using namespace io_test;

namespace {

class InputHardening : public ::testing::Test {
protected:
    std::string dir = scratch_dir();
    std::string fifo() {
        std::string p = dir + "/pipe";
        EXPECT_EQ(::mkfifo(p.c_str(), 0600), 0);
        return p;
    }
};

}  // namespace

TEST_F(InputHardening, NpyDimensionPast2To64IsTooLargeNotWrapped) {
    // 18446744073709551620 = 2^64 + 4 read as 4 before the range check.
    EXPECT_THROW(parse_py_literal("(18446744073709551620,)"), PyLiteralError);
    EXPECT_EQ(parse_py_literal("(9223372036854775807,)").items.at(0).integer, INT64_MAX);
    EXPECT_THROW(parse_py_literal("9223372036854775808"), PyLiteralError);
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551620,), }";
    header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
    auto path = write_file(dir + "/wrap.npy", std::string("\x93NUMPY\x01\x00", 8) + uint_bytes(header.size(), 2) +
                                                  header + f32_bytes({1, 2, 3, 4}));
    expect_error([&] { read_npy(path); }, path, "integer too large");
}

TEST_F(InputHardening, SafetensorsDuplicateTensorIsRefusedByName) {
    const std::string h = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                          R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})";
    auto path = write_file(dir + "/dup.safetensors", uint_bytes(h.size(), 8) + h + f32_bytes({1}));
    expect_error([&] { read_safetensors(path); }, path, "duplicate key \"w\"");
}

TEST_F(InputHardening, FifosAreRefusedNotWaitedOn) {
    const std::string p = fifo();
    expect_error([&] { read_npy(p); }, p, "is a FIFO, not a regular file");
    for (auto* load : {+[](const std::string& f) { load_train_config(f); },
                       +[](const std::string& f) { load_text_file(f); },
                       +[](const std::string& f) { load_token_file(f, 256); },
                       +[](const std::string& f) { load_checkpoint(f); }}) {
        const std::string m = error_of([&] { load(p); });
        EXPECT_EQ(m.rfind(p + ": cannot open ", 0), 0u) << m;
        EXPECT_NE(m.find("is a FIFO, not a regular file"), std::string::npos) << m;
    }
}

TEST_F(InputHardening, DevicesAndDirectoriesAreNamed) {
    for (std::string p : {std::string("/dev/zero"), dir}) {
        for (auto* load : {+[](const std::string& f) { load_train_config(f); },
                           +[](const std::string& f) { load_text_file(f); },
                           +[](const std::string& f) { load_checkpoint(f); }}) {
            const std::string m = error_of([&] { load(p); });
            EXPECT_EQ(m.rfind(p + ": cannot open ", 0), 0u) << m;
            EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
        }
    }
}

TEST_F(InputHardening, ReadRegularFileHonoursItsLimit) {
    auto path = write_file(dir + "/big.json", std::string(100, ' '));
    EXPECT_EQ(read_regular_file(path, "config file", 100).size(), 100u);
    EXPECT_NE(error_of([&] { read_regular_file(path, "config file", 99); }).find("100 bytes, more than the 99"),
              std::string::npos);
}
