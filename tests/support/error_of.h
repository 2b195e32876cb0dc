// The message of the exception a call throws, for tests that check what an error says
// (the file, the field, the value), and a check that a text contains another.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace fp8scope::testing {

inline std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace fp8scope::testing

#define FP8SCOPE_EXPECT_CONTAINS(haystack, needle) \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
