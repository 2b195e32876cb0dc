// Recursive descent over the literal grammar, with a depth limit so that a header of
// nested brackets cannot exhaust the stack.
#include "io/py_literal.h"

#include "util/clip.h"

#include <cctype>
#include <cstdint>

namespace fp8scope {

namespace {

constexpr int kMaxDepth = 32;

class Parser {
public:
    explicit Parser(std::string_view t) : t_(t) {}

    PyLiteral parse_all() {
        PyLiteral v = value(0);
        skip_space();
        if (pos_ != t_.size()) fail("unexpected text after the literal");
        return v;
    }

private:
    std::string_view t_;
    std::size_t pos_ = 0;

    [[noreturn]] void fail(const std::string& what) const {
        throw PyLiteralError(what + " at offset " + std::to_string(pos_));
    }
    void skip_space() {
        while (pos_ < t_.size() && (t_[pos_] == ' ' || t_[pos_] == '\t' || t_[pos_] == '\n' || t_[pos_] == '\r'))
            ++pos_;
    }
    bool peek(char c) {
        skip_space();
        return pos_ < t_.size() && t_[pos_] == c;
    }
    void expect(char c) {
        if (!peek(c)) fail(std::string("expected '") + c + "'");
        ++pos_;
    }

    PyLiteral value(int depth) {
        if (depth > kMaxDepth) fail("nesting too deep");
        skip_space();
        if (pos_ >= t_.size()) fail("unexpected end");
        char c = t_[pos_];
        if (c == '\'' || c == '"') return string();
        if (c == '{') return dict(depth);
        if (c == '[') return sequence(depth, ']', PyLiteral::Kind::List);
        if (c == '(') return sequence(depth, ')', PyLiteral::Kind::Tuple);
        if (c == '-' || (c >= '0' && c <= '9')) return integer();
        return word();
    }

    PyLiteral string() {
        char quote = t_[pos_++];
        PyLiteral v;
        v.kind = PyLiteral::Kind::Str;
        while (true) {
            if (pos_ >= t_.size() || t_[pos_] == '\n') fail("unterminated string");
            char c = t_[pos_++];
            if (c == quote) break;
            if (c == '\\') {
                if (pos_ >= t_.size()) fail("unterminated string");
                char e = t_[pos_++];
                if (e != '\\' && e != '\'' && e != '"') fail("unsupported escape in string");
                c = e;
            }
            v.str += c;
        }
        return v;
    }

    PyLiteral integer() {
        bool negative = t_[pos_] == '-';
        if (negative) ++pos_;
        skip_space();
        std::size_t start = pos_;
        std::uint64_t mag = 0;
        while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
            // Checked before the multiplication: after it, 2^64 + 4 would have wrapped to 4.
            const std::uint64_t digit = std::uint64_t(t_[pos_] - '0');
            if (mag > (std::uint64_t(INT64_MAX) - digit) / 10) fail("integer too large");
            mag = mag * 10 + digit;
            ++pos_;
        }
        if (pos_ == start) fail("expected a digit");
        if (pos_ - start > 1 && t_[start] == '0') fail("integer with a leading zero");
        if (pos_ < t_.size() && (std::isalpha(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '.' || t_[pos_] == '_'))
            fail("not an integer");
        PyLiteral v;
        v.kind = PyLiteral::Kind::Int;
        v.integer = negative ? -std::int64_t(mag) : std::int64_t(mag);
        return v;
    }

    PyLiteral word() {
        std::size_t start = pos_;
        while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_')) ++pos_;
        std::string_view w = t_.substr(start, pos_ - start);
        PyLiteral v;
        if (w == "True" || w == "False") {
            v.kind = PyLiteral::Kind::Bool;
            v.boolean = w == "True";
        } else if (w == "None") {
            v.kind = PyLiteral::Kind::None;
        } else {
            pos_ = start;
            fail(w.empty() ? "unexpected character" : "unknown name '" + clip(w) + "'");
        }
        return v;
    }

    // '(' and '[': items separated by commas, trailing comma allowed; "(x)" without a
    // comma is a parenthesised value, not a tuple, as in Python.
    PyLiteral sequence(int depth, char close, PyLiteral::Kind kind) {
        ++pos_;
        PyLiteral v;
        v.kind = kind;
        bool comma = false;
        while (!peek(close)) {
            v.items.push_back(value(depth + 1));
            if (peek(close)) break;
            expect(',');
            comma = true;
        }
        ++pos_;
        if (kind == PyLiteral::Kind::Tuple && v.items.size() == 1 && !comma) return std::move(v.items[0]);
        return v;
    }

    PyLiteral dict(int depth) {
        ++pos_;
        PyLiteral v;
        v.kind = PyLiteral::Kind::Dict;
        while (!peek('}')) {
            skip_space();
            std::size_t key_pos = pos_;
            PyLiteral key = value(depth + 1);
            if (key.kind != PyLiteral::Kind::Str) {
                pos_ = key_pos;
                fail("dictionary key is not a string");
            }
            for (auto& [k, _] : v.entries)
                if (k == key.str) {
                    pos_ = key_pos;
                    fail("duplicate key '" + clip(key.str) + "'");
                }
            expect(':');
            v.entries.push_back({key.str, value(depth + 1)});
            if (peek('}')) break;
            expect(',');
        }
        ++pos_;
        return v;
    }
};

}  // namespace

std::string PyLiteral::repr() const {
    switch (kind) {
        case Kind::Str: return "'" + str + "'";
        case Kind::Int: return std::to_string(integer);
        case Kind::Bool: return boolean ? "True" : "False";
        case Kind::None: return "None";
        case Kind::Tuple:
        case Kind::List: {
            std::string s = kind == Kind::Tuple ? "(" : "[";
            for (std::size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i].repr();
            if (kind == Kind::Tuple && items.size() == 1) s += ",";
            return s + (kind == Kind::Tuple ? ")" : "]");
        }
        case Kind::Dict: {
            std::string s = "{";
            for (std::size_t i = 0; i < entries.size(); ++i)
                s += (i ? ", '" : "'") + entries[i].key + "': " + entries[i].value.repr();
            return s + "}";
        }
    }
    return "";
}

PyLiteral parse_py_literal(std::string_view text) { return Parser(text).parse_all(); }

}  // namespace fp8scope
