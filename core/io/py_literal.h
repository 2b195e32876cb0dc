// A strict parser for the Python literals that .npy headers are written in: dicts,
// tuples, lists, strings, integers, True/False/None. Enough to read a header as
// Python's ast.literal_eval would, without guessing from substrings.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp8scope {

struct PyLiteral {
    enum class Kind { Str, Int, Bool, None, Tuple, List, Dict };
    Kind kind = Kind::None;
    std::string str;                                         // Str
    std::int64_t integer = 0;                                // Int
    bool boolean = false;                                    // Bool
    std::vector<PyLiteral> items;                            // Tuple, List
    std::vector<std::pair<std::string, PyLiteral>> entries;  // Dict (string keys only), in order

    // Python spelling, for error messages ("(3, 4)", "'<f4'").
    std::string repr() const;
};

struct PyLiteralError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Parses one literal filling the whole text (surrounding whitespace allowed).
PyLiteral parse_py_literal(std::string_view text);

}  // namespace fp8scope
