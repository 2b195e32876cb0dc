// Helpers for the tensor file tests: a scratch directory per test, files written from
// hand-built bytes, little/big-endian encoders, and a check that a read fails with a
// TensorFileError naming the file and the problem.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <functional>
#include <typeinfo>
#include <string>
#include <vector>

#include "io/tensor_file.h"

namespace io_test {

// A fresh directory under the test temp dir, named after the running test.
inline std::string scratch_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "fp8scope_io" /
                                (std::string(info->test_suite_name()) + "." + info->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir.string();
}

inline std::string write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
    EXPECT_TRUE(f.good()) << path;
    return path;
}

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// n-byte unsigned integer in the given byte order.
inline std::string uint_bytes(std::uint64_t v, int n, bool big = false) {
    std::string s(n, '\0');
    for (int i = 0; i < n; ++i) s[big ? n - 1 - i : i] = char((v >> (8 * i)) & 0xFF);
    return s;
}

inline std::string f16_bytes(const std::vector<std::uint16_t>& bits, bool big = false) {
    std::string s;
    for (auto b : bits) s += uint_bytes(b, 2, big);
    return s;
}

inline std::string f32_bytes(const std::vector<float>& v, bool big = false) {
    std::string s;
    for (float f : v) s += uint_bytes(std::bit_cast<std::uint32_t>(f), 4, big);
    return s;
}

inline std::string f64_bytes(const std::vector<double>& v, bool big = false) {
    std::string s;
    for (double d : v) s += uint_bytes(std::bit_cast<std::uint64_t>(d), 8, big);
    return s;
}

// Runs `read` and checks it throws a TensorFileError for `path` whose problem contains
// `problem`; the message must be "path: problem".
inline void expect_error(const std::function<void()>& read, const std::string& path, const std::string& problem) {
    try {
        read();
        ADD_FAILURE() << "no error for " << path << ", expected: " << problem;
    } catch (const fp8scope::TensorFileError& e) {
        EXPECT_EQ(e.path(), path);
        EXPECT_NE(e.problem().find(problem), std::string::npos) << "problem: " << e.problem();
        EXPECT_EQ(std::string(e.what()), path + ": " + e.problem());
    }
}

}  // namespace io_test

namespace io_test {

// Corrupts `good` many ways (byte flips, truncation, random bytes at the front) and
// checks each read either succeeds or throws a TensorFileError: no other exception,
// and (under the sanitizers) no memory error.
inline void expect_only_tensor_file_errors(const std::string& path, const std::string& good,
                                           const std::function<void()>& read) {
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    };
    for (int round = 0; round < 400; ++round) {
        std::string bytes = good;
        switch (round % 3) {
            case 0:
                for (int k = 0; k < 1 + int(next() % 4); ++k) bytes[next() % bytes.size()] = char(next());
                break;
            case 1: bytes.resize(next() % bytes.size()); break;
            default:
                for (std::size_t k = 0; k < std::min<std::size_t>(bytes.size(), 16); ++k)
                    if (next() % 2) bytes[k] = char(next());
        }
        write_file(path, bytes);
        try {
            read();
        } catch (const fp8scope::TensorFileError&) {
        } catch (const std::exception& e) {
            ADD_FAILURE() << "round " << round << ": " << typeid(e).name() << ": " << e.what();
            return;
        }
    }
}

}  // namespace io_test
