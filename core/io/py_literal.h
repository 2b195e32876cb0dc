// A strict parser for the Python literals that .npy headers are written in: dicts,
// tuples, lists, strings, integers, True/False/None. Enough to read a header as
// Python's ast.literal_eval would, without guessing from substrings.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fp8scope {

struct PyDictEntry;

struct PyLiteral {
    enum class Kind { Str, Int, Bool, None, Tuple, List, Dict };
    Kind kind = Kind::None;
    std::string str;                                         // Str
    std::int64_t integer = 0;                                // Int
    bool boolean = false;                                    // Bool
    std::vector<PyLiteral> items;                            // Tuple, List
    std::vector<PyDictEntry> entries;                        // Dict (string keys only), in order

    // Python spelling, for error messages ("(3, 4)", "'<f4'").
    std::string repr() const;
};

// A struct, not std::pair<std::string, PyLiteral>: a pair of the still incomplete
// PyLiteral inside PyLiteral does not compile with clang and libstdc++.
struct PyDictEntry {
    std::string key;
    PyLiteral value;
};

struct PyLiteralError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Parses one literal filling the whole text (surrounding whitespace allowed).
PyLiteral parse_py_literal(std::string_view text);

}  // namespace fp8scope
