// JSON from other people's files, and JSON we print: the three rules every reader and
// writer of JSON in fp8scope goes through.
// - Parsing is bounded: nesting deeper than a limit is refused while parsing (nlohmann's
//   parser is iterative, but printing, comparing or walking a deep value recurses), and a
//   key that appears twice in one object is refused naming the key (nlohmann would keep
//   the last one silently).
// - A value quoted in an error message is cut to a few dozen characters and a few levels,
//   in time bounded by that budget, so a 400 KB value never reaches a message.
// - Dumping replaces bytes that are not UTF-8 (a file name, a quoted header) with U+FFFD:
//   nlohmann's default throws type_error 316, which ended in std::terminate.
#pragma once

#include <cstddef>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/clip.h"

namespace fp8scope {

// A JSON text that does not parse or breaks a limit; the message names the problem, the
// caller puts the file name in front.
class JsonInputError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Deep enough for every format we read (a config is 2 levels, a safetensors header 3).
constexpr int kMaxJsonDepth = 64;

template <class Json>
std::string dump_json(const Json& j, int indent = -1) {
    return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

namespace json_detail {
template <class Json>
void show(const Json& j, std::string& out, std::size_t budget, int depth) {
    if (out.size() > budget) return;
    if (j.is_array() || j.is_object()) {
        const bool obj = j.is_object();
        if (depth >= 3) {
            out += obj ? "{...}" : "[...]";
            return;
        }
        out += obj ? '{' : '[';
        bool first = true;
        for (auto it = j.begin(); it != j.end() && out.size() <= budget; ++it) {
            if (!first) out += ',';
            first = false;
            if (obj) out += dump_json(Json(it.key().substr(0, budget))) + ':';
            show(*it, out, budget, depth + 1);
        }
        out += obj ? '}' : ']';
    } else if (j.is_string()) {
        out += dump_json(Json(j.template get_ref<const std::string&>().substr(0, budget)));
    } else {
        out += dump_json(j);
    }
}
}  // namespace json_detail

// `j` as JSON text for an error message: at most `max_chars` characters (then "...").
template <class Json>
std::string show_json(const Json& j, std::size_t max_chars = 60) {
    std::string out;
    json_detail::show(j, out, max_chars, 0);
    if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
    return out;
}

// Parses `text` under the limits above. Throws JsonInputError.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, int max_depth = kMaxJsonDepth) {
    std::vector<std::set<std::string, std::less<>>> keys;  // per open object
    auto check = [&](int depth, typename Json::parse_event_t event, Json& parsed) {
        using E = typename Json::parse_event_t;
        if (depth > max_depth) throw JsonInputError("nested deeper than " + std::to_string(max_depth) + " levels");
        if (event == E::object_start) keys.emplace_back();
        else if (event == E::object_end && !keys.empty()) keys.pop_back();
        else if (event == E::key && !keys.empty() && !keys.back().insert(parsed.template get<std::string>()).second)
            throw JsonInputError("duplicate key " + show_json(parsed));
        return true;
    };
    try {
        return Json::parse(text.begin(), text.end(), check);
    } catch (const typename Json::exception& e) {
        // parse_error, or out_of_range for 1e400; nlohmann quotes the token, which may be long.
        throw JsonInputError(clip(e.what(), 160));
    }
}

}  // namespace fp8scope
