// Quantizer names: the one spelling of each quantizer used by the CLI, JSON and HDF5.
// Options are written in a fixed order and only when they differ from the default, so
// recipe_name(parse_recipe(n)) == n for every canonical name n. Parsing is strict and
// every error names the part of the name that is wrong.
#include "fp8/recipe.h"

#include <algorithm>

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace fp8scope {
namespace {

constexpr int kDefaultHistory = 1024;
constexpr int kMaxHistory = 1000000;
constexpr int kDefaultMXBlock = 32;

constexpr std::string_view kKnownRecipes =
    "current_e4m3, current_e4m3_pow2, current_e5m2, current_e5m2_pow2, delayed_e4m3, "
    "delayed_e5m2, block<R>x<C>_fp32, block<R>x<C>_pow2, mxfp8_e4m3_floor, mxfp8_e4m3_rceil, "
    "mxfp8_e5m2_floor, mxfp8_e5m2_rceil, nvfp4, nvfp4_2d, mxfp4_floor, mxfp4_rceil";

[[noreturn]] void fail(std::string_view base, const std::string& what) {
    throw std::invalid_argument(std::string(base) + ": " + what);
}

std::string quoted(std::string_view s) {
    std::string q;
    q.reserve(s.size() + 2);
    q.append(1, '\'').append(s).append(1, '\'');
    return q;
}

// Whole-string integer; nullopt on anything else (sign '+', spaces, fractions, overflow).
std::optional<long long> to_integer(std::string_view s) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

int integer_in_range(std::string_view base, std::string_view key, std::string_view text,
                     long long lo, long long hi, const std::string& range_text) {
    const auto v = to_integer(text);
    if (!v) fail(base, std::string(key) + " must be an integer, got " + quoted(text));
    if (*v < lo || *v > hi) fail(base, std::string(key) + " must be " + range_text + ", got " + quoted(text));
    return static_cast<int>(*v);
}

// Shortest decimal that reads back as the same float, so eps round-trips exactly.
std::string float_text(float v) {
    char buf[64];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, ec == std::errc() ? end : buf);
}

// Splits the options of a quantizer name, its base naming it in errors.
std::vector<NameOption> split_options(std::string_view base, std::string_view rest,
                                      std::initializer_list<std::string_view> known) {
    return name_options(rest, known, std::string(base));
}

Recipe parse_current(std::string_view base, std::string_view rest) {
    // current_<fmt>[_pow2]
    CurrentScaling r;
    std::string_view tail = base.substr(std::string_view("current_").size());
    if (tail.ends_with("_pow2")) {
        r.pow2 = true;
        tail.remove_suffix(5);
    }
    if (!parse_format(tail, r.format)) throw std::invalid_argument("unknown quantizer " + quoted(base) + "; known: " + std::string(kKnownRecipes));
    for (const NameOption& o : split_options(base, rest, {"eps"})) {
        float v = 0.0f;
        const auto [end, ec] = std::from_chars(o.value.data(), o.value.data() + o.value.size(), v);
        if (ec != std::errc() || end != o.value.data() + o.value.size() || !std::isfinite(v) || v < 0.0f) {
            fail(base, "eps must be a finite number >= 0, got " + quoted(o.value));
        }
        r.eps = v;
    }
    return r;
}

Recipe parse_delayed(std::string_view base, std::string_view rest) {
    DelayedScaling r;
    if (!parse_format(base.substr(std::string_view("delayed_").size()), r.format)) {
        throw std::invalid_argument("unknown quantizer " + quoted(base) + "; known: " + std::string(kKnownRecipes));
    }
    for (const NameOption& o : split_options(base, rest, {"history", "algo", "margin"})) {
        if (o.key == "history") {
            r.history = integer_in_range(base, o.key, o.value, 1, kMaxHistory, "1..1000000");
        } else if (o.key == "algo") {
            if (o.value == "max") r.algo = AmaxAlgo::Max;
            else if (o.value == "most_recent") r.algo = AmaxAlgo::MostRecent;
            else fail(base, "algo must be max or most_recent, got " + quoted(o.value));
        } else {
            r.margin = integer_in_range(base, o.key, o.value, std::numeric_limits<int>::min(),
                                        std::numeric_limits<int>::max(), "an int");
        }
    }
    return r;
}

// A block dimension: digits without a leading zero, >= 1.
int block_dim(std::string_view base, std::string_view what, std::string_view text) {
    if (text.size() > 1 && text[0] == '0') fail(base, std::string(what) + " must be written without leading zeros, got " + quoted(text));
    return integer_in_range(base, what, text, 1, std::numeric_limits<int>::max(), "an integer >= 1");
}

Recipe parse_block(std::string_view base, std::string_view rest) {
    // block<R>x<C>_(fp32|pow2)
    BlockScaling r;
    const std::string_view dims_and_kind = base.substr(std::string_view("block").size());
    const std::size_t us = dims_and_kind.rfind('_');
    const std::string_view dims = dims_and_kind.substr(0, us);
    const std::string_view kind = us == std::string_view::npos ? std::string_view{} : dims_and_kind.substr(us + 1);
    const std::size_t x = dims.find('x');
    if (us == std::string_view::npos || x == std::string_view::npos) {
        fail(base, "blockwise quantizers are written block<R>x<C>_fp32 or block<R>x<C>_pow2");
    }
    r.block_rows = block_dim(base, "block rows", dims.substr(0, x));
    r.block_cols = block_dim(base, "block cols", dims.substr(x + 1));
    if (kind == "fp32") r.pow2 = false;
    else if (kind == "pow2") r.pow2 = true;
    else fail(base, "scale type must be fp32 or pow2, got " + quoted(kind));
    for (const NameOption& o : split_options(base, rest, {"format"})) {
        if (!parse_format(o.value, r.format)) fail(base, "format must be e4m3 or e5m2, got " + quoted(o.value));
    }
    return r;
}

Recipe parse_mx(std::string_view base, std::string_view rest) {
    // mxfp8_<fmt>_(floor|rceil)
    MXScaling r;
    std::string_view tail = base.substr(std::string_view("mxfp8_").size());
    const std::size_t us = tail.find('_');
    const std::string_view rule = us == std::string_view::npos ? std::string_view{} : tail.substr(us + 1);
    bool ok = us != std::string_view::npos && parse_format(tail.substr(0, us), r.format);
    if (rule == "floor") r.rule = MXRule::Floor;
    else if (rule == "rceil") r.rule = MXRule::RCeil;
    else ok = false;
    if (!ok) throw std::invalid_argument("unknown quantizer " + quoted(base) + "; known: " + std::string(kKnownRecipes));
    for (const NameOption& o : split_options(base, rest, {"block"})) {
        r.block = integer_in_range(base, o.key, o.value, 1, std::numeric_limits<int>::max(), "an integer >= 1");
    }
    return r;
}

// nvfp4, nvfp4_2d, mxfp4_floor, mxfp4_rceil: fixed shapes; options rht and sr (0 or 1).
Recipe parse_fp4(std::string_view base, std::string_view rest) {
    for (Recipe r : fp4_analysis_recipes()) {
        if (recipe_name(r) != base) continue;
        for (const NameOption& o : split_options(base, rest, {"rht", "sr"})) {
            const bool on = integer_in_range(base, o.key, o.value, 0, 1, "0 or 1") == 1;
            std::visit(
                [&](auto& q) {
                    if constexpr (requires { q.sr; }) (o.key == "rht" ? q.rht : q.sr) = on;
                },
                r);
        }
        return r;
    }
    throw std::invalid_argument("unknown quantizer " + quoted(base) + "; known: " + std::string(kKnownRecipes));
}

std::string fp4_options(bool rht, bool sr) { return std::string(rht ? ":rht=1" : "") + (sr ? ":sr=1" : ""); }

std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
}

}  // namespace

std::string recipe_name(const Recipe& recipe) {
    struct Namer {
        std::string operator()(const CurrentScaling& r) const {
            std::string s = "current_" + std::string(name(r.format)) + (r.pow2 ? "_pow2" : "");
            if (r.eps != 0.0f) s += ":eps=" + float_text(r.eps);
            return s;
        }
        std::string operator()(const DelayedScaling& r) const {
            std::string s = "delayed_" + std::string(name(r.format));
            if (r.history != kDefaultHistory) s += ":history=" + std::to_string(r.history);
            if (r.algo != AmaxAlgo::Max) s += ":algo=most_recent";
            if (r.margin != 0) s += ":margin=" + std::to_string(r.margin);
            return s;
        }
        std::string operator()(const BlockScaling& r) const {
            std::string s = "block" + std::to_string(r.block_rows) + "x" + std::to_string(r.block_cols) +
                            (r.pow2 ? "_pow2" : "_fp32");
            if (r.format != Format::E4M3) s += ":format=" + std::string(name(r.format));
            return s;
        }
        std::string operator()(const MXScaling& r) const {
            std::string s = "mxfp8_" + std::string(name(r.format)) + (r.rule == MXRule::Floor ? "_floor" : "_rceil");
            if (r.block != kDefaultMXBlock) s += ":block=" + std::to_string(r.block);
            return s;
        }
        std::string operator()(const NVFP4Scaling& r) const {
            return (r.two_d ? "nvfp4_2d" : "nvfp4") + fp4_options(r.rht, r.sr);
        }
        std::string operator()(const MXFP4Scaling& r) const {
            return (r.rule == MXRule::Floor ? "mxfp4_floor" : "mxfp4_rceil") + fp4_options(r.rht, r.sr);
        }
    };
    return std::visit(Namer{}, recipe);
}

bool is_fp4(const Recipe& r) {
    return std::holds_alternative<NVFP4Scaling>(r) || std::holds_alternative<MXFP4Scaling>(r);
}

Recipe rowwise_quantizer(const Recipe& r) {
    Recipe out = r;
    std::visit(
        [](auto& q) {
            if constexpr (requires { q.rht; }) q.rht = false;
        },
        out);
    return out;
}

Format recipe_format(const Recipe& r) {
    if (is_fp4(r)) throw std::invalid_argument(recipe_name(r) + ": an FP4 (E2M1) quantizer has no FP8 format");
    return std::visit(
        [](const auto& v) {
            if constexpr (requires { v.format; }) return v.format;
            else return Format::E4M3;  // not reached: the FP4 quantizers are refused above
        },
        r);
}

Recipe parse_recipe(std::string_view text) {
    if (text.empty()) throw std::invalid_argument("empty quantizer name; known: " + std::string(kKnownRecipes));
    const std::size_t colon = text.find(':');
    const std::string_view base = text.substr(0, colon);
    const std::string_view rest = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
    if (colon != std::string_view::npos && rest.empty()) fail(base, "empty option (trailing ':')");
    if (base.starts_with("current_")) return parse_current(base, rest);
    if (base.starts_with("delayed_")) return parse_delayed(base, rest);
    if (base.starts_with("mxfp8_")) return parse_mx(base, rest);
    if (base.starts_with("block")) return parse_block(base, rest);
    if (base.starts_with("nvfp4") || base.starts_with("mxfp4_")) return parse_fp4(base, rest);
    throw std::invalid_argument("unknown quantizer " + quoted(base) + "; known: " + std::string(kKnownRecipes));
}

std::vector<Recipe> parse_recipe_list(std::string_view list) {
    std::vector<Recipe> out;
    std::vector<std::pair<std::string, std::string>> seen;  // canonical name, as written
    const auto add = [&](const Recipe& r, std::string_view written) {
        std::string canonical = recipe_name(r);
        for (const auto& [name, first] : seen) {
            if (name != canonical) continue;
            std::string msg = "duplicate quantizer " + quoted(canonical) + " in list";
            if (first != written) msg += " (" + quoted(first) + " and " + quoted(written) + ")";
            throw std::invalid_argument(msg);
        }
        seen.emplace_back(std::move(canonical), std::string(written));
        out.push_back(r);
    };
    // Shape errors (empty items) first, so they are reported before any name error.
    std::vector<std::string_view> items;
    std::string_view rest = list;
    for (bool more = true; more;) {
        const std::size_t comma = rest.find(',');
        more = comma != std::string_view::npos;
        items.push_back(trim(rest.substr(0, comma)));
        rest = more ? rest.substr(comma + 1) : std::string_view{};
        if (items.back().empty()) {
            throw std::invalid_argument("quantizer list " + quoted(list) + ": item " + std::to_string(items.size()) +
                                        " is empty");
        }
    }
    for (std::string_view item : items) {
        if (item == "all") {
            for (const Recipe& r : what_if_recipes()) add(r, "all");
        } else {
            add(parse_recipe(item), item);
        }
    }
    return out;
}

std::vector<Recipe> default_analysis_recipes() {
    return {
        CurrentScaling{Format::E4M3, 0.0f, false},
        CurrentScaling{Format::E4M3, 0.0f, true},
        CurrentScaling{Format::E5M2, 0.0f, false},
        BlockScaling{Format::E4M3, 1, 128, false},
        BlockScaling{Format::E4M3, 1, 128, true},
        BlockScaling{Format::E4M3, 128, 128, false},
        BlockScaling{Format::E4M3, 128, 128, true},
        MXScaling{Format::E4M3, MXRule::Floor, 32},
        MXScaling{Format::E4M3, MXRule::RCeil, 32},
        MXScaling{Format::E5M2, MXRule::Floor, 32},
        MXScaling{Format::E5M2, MXRule::RCeil, 32},
    };
}

std::vector<Recipe> fp4_analysis_recipes() {
    return {NVFP4Scaling{.two_d = false}, NVFP4Scaling{.two_d = true}, MXFP4Scaling{.rule = MXRule::Floor},
            MXFP4Scaling{.rule = MXRule::RCeil}};
}

std::vector<Recipe> what_if_recipes() {
    std::vector<Recipe> all = default_analysis_recipes();
    for (const Recipe& r : fp4_analysis_recipes()) all.push_back(r);
    return all;
}

std::vector<NameOption> name_options(std::string_view rest, std::initializer_list<std::string_view> known,
                                     const std::string& prefix) {
    auto fail = [&](const std::string& why) { throw std::invalid_argument(prefix + ": " + why); };
    std::vector<NameOption> out;
    while (!rest.empty()) {
        const std::size_t colon = rest.find(':');
        const std::string_view item = rest.substr(0, colon);
        rest = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        if (item.empty()) fail("empty option (two ':' in a row or a trailing ':')");
        const std::size_t eq = item.find('=');
        if (eq == std::string_view::npos) fail("option " + quoted(item) + " needs a value (key=value)");
        const NameOption opt{item.substr(0, eq), item.substr(eq + 1)};
        std::string known_list;
        for (std::string_view k : known) known_list += (known_list.empty() ? "" : ", ") + std::string(k);
        if (std::find(known.begin(), known.end(), opt.key) == known.end())
            fail("unknown option " + quoted(opt.key) + "; known: " + (known_list.empty() ? std::string("none") : known_list));
        for (const NameOption& seen : out)
            if (seen.key == opt.key) fail("option " + quoted(opt.key) + " given more than once");
        if (opt.value.empty()) fail("option " + quoted(opt.key) + " has an empty value");
        out.push_back(opt);
    }
    return out;
}

}  // namespace fp8scope
