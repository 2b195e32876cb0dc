// Outlier injection's checks, resolution against a model's linears and events (injection.h).
#include "engine/injection.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "fp8/precision_plan.h"

namespace fp8scope {
namespace {

std::string number(double v) {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

std::string block_prefix(int layer) { return "blocks." + std::to_string(layer) + "."; }

// The operand's (rows, cols) in Fp8Linear's layout.
std::pair<std::int64_t, std::int64_t> operand_shape(const LinearInfo& l, Operand o, std::int64_t N) {
    switch (o) {
        case Operand::X: return {N, l.in_features};
        case Operand::W: return {l.out_features, l.in_features};
        case Operand::DY: break;
    }
    return {N, l.out_features};
}

const char* index_field(const Injection& in) { return in.rows ? "rows" : "channels"; }

// At most a few indices, so an event's detail stays short.
std::string index_list(const std::vector<std::int64_t>& indices) {
    constexpr std::size_t kShown = 8;
    std::string s;
    for (std::size_t i = 0; i < indices.size() && i < kShown; ++i) {
        if (i) s += ',';
        s += std::to_string(indices[i]);
    }
    if (indices.size() > kShown) s.append(",... (").append(std::to_string(indices.size())).append(")");
    return s;
}

}  // namespace

Operand operand_from_name(const std::string& name) {
    for (Operand o : {Operand::X, Operand::W, Operand::DY})
        if (operand_name(o) == name) return o;
    throw std::invalid_argument("'" + name + "' is not an operand (x, w, dy)");
}

std::string Injection::describe() const {
    std::string where = layer ? block_prefix(*layer) + linear : linear + " of every block";
    std::string s = std::string(operand_name(operand)) + " of " + where + " " + index_field(*this) + " " +
                    index_list(indices) + " x" + number(scale) + ", steps " + std::to_string(step) + "..";
    return s + (until ? std::to_string(*until) : "");
}

void check_injection(const Injection& in, const std::string& field) {
    auto fail = [&](const std::string& f, const std::string& why) {
        throw std::invalid_argument("field '" + field + "." + f + "': " + why);
    };
    if (in.step < 1) fail("step", "the first step is 1, got " + std::to_string(in.step));
    if (in.until && *in.until < in.step)
        fail("until", std::to_string(*in.until) + " is before step " + std::to_string(in.step));
    if (!std::isfinite(in.scale) || in.scale <= 0) fail("scale", "expected a finite factor > 0, got " + number(in.scale));
    if (in.linear.empty()) fail("linear", "expected a linear name pattern (\"mlp.fc2\")");
    if (in.layer && *in.layer < 0) fail("layer", "expected a block index >= 0, got " + std::to_string(*in.layer));
    if (in.indices.empty()) fail(index_field(in), "expected at least one index");
    for (std::size_t k = 0; k < in.indices.size(); ++k) {
        const std::int64_t i = in.indices[k];
        if (i < 0) fail(index_field(in), "index " + std::to_string(i) + " is negative");
        // twice would scale twice, or race on a device
        if (std::find(in.indices.begin(), in.indices.begin() + std::ptrdiff_t(k), i) != in.indices.begin() + std::ptrdiff_t(k))
            fail(index_field(in), "index " + std::to_string(i) + " is listed twice");
    }
}

std::vector<LinearInjection> resolve_injections(const std::vector<Injection>& list,
                                                const std::vector<LinearInfo>& linears, std::int64_t rows_per_rank) {
    int blocks = 0;
    for (const LinearInfo& l : linears) blocks = std::max(blocks, l.layer + 1);
    std::vector<LinearInjection> out;
    for (std::size_t e = 0; e < list.size(); ++e) {
        const Injection& in = list[e];
        const std::string field = "inject[" + std::to_string(e) + "]";
        check_injection(in, field);
        if (in.layer && *in.layer >= blocks)
            throw std::invalid_argument("field '" + field + ".layer': block " + std::to_string(*in.layer) +
                                        " is out of range [0, " + std::to_string(blocks) + ")");
        bool matched = false;
        for (std::size_t l = 0; l < linears.size(); ++l) {
            const LinearInfo& info = linears[l];
            const std::string prefix = block_prefix(info.layer);
            if ((in.layer && info.layer != *in.layer) || info.name.rfind(prefix, 0) != 0 ||
                !glob_match(in.linear, std::string_view(info.name).substr(prefix.size())))
                continue;
            matched = true;
            const auto [rows, cols] = operand_shape(info, in.operand, rows_per_rank);
            const std::int64_t bound = in.rows ? rows : cols;
            for (std::int64_t i : in.indices)
                if (i >= bound)
                    throw std::invalid_argument("field '" + field + "." + index_field(in) + "': " + std::to_string(i) +
                                                " is out of range for " + std::string(operand_name(in.operand)) +
                                                " of " + info.name + " (" + std::to_string(rows) + " x " +
                                                std::to_string(cols) + "): " + index_field(in) + " [0, " +
                                                std::to_string(bound) + ")");
            out.push_back({int(l), in});
        }
        if (!matched) {
            std::string names;
            for (const LinearInfo& info : linears)
                if (info.layer == 0) names += (names.empty() ? "" : ", ") + info.name.substr(block_prefix(0).size());
            throw std::invalid_argument("field '" + field + ".linear': '" + in.linear + "' matches no linear of " +
                                        (in.layer ? "block " + std::to_string(*in.layer) : std::string("any block")) +
                                        " (" + names + ")");
        }
    }
    return out;
}

std::vector<InjectionEvent> injection_events(const std::vector<Injection>& list, std::int64_t at_step) {
    std::vector<InjectionEvent> out;
    for (const Injection& in : list) {
        if (at_step == in.step) out.push_back({true, "start: " + in.describe()});
        if (in.until && at_step == *in.until + 1) out.push_back({false, "end: " + in.describe()});
    }
    return out;
}

}  // namespace fp8scope
