// Transformer Engine statistics logs: file discovery, line layout, metric names.
#include "te_log.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <istream>
#include <unordered_map>

namespace fp8scope::te_log {
namespace fs = std::filesystem;

namespace {

constexpr std::array<std::string_view, kTensorCount> kTensorNames = {"activation", "weight", "gradient",
                                                                     "output",     "wgrad",  "dgrad"};
// LogFp8TensorStats' recipes (TE >= 2.7) and LogNvfp4TensorStats' prefix (TE >= 2.13).
constexpr std::array<std::string_view, 5> kRecipes = {"fp8_delayed_scaling", "fp8_current_scaling",
                                                      "fp8_block_scaling", "mxfp8", "nvfp4"};
constexpr std::string_view kStatisticsFolder = "nvdlfw_inspect_statistics_logs";
constexpr std::string_view kDebugFolder = "nvdlfw_inspect_logs";
constexpr std::string_view kLevels[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};

// A value quoted in a message is cut to a few dozen characters.
std::string excerpt(std::string_view s) {
    constexpr std::size_t kMax = 60;
    std::string out(1, '\'');
    out.append(s.substr(0, kMax));
    out += s.size() > kMax ? "...'" : "'";
    return out;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string_view> tokens(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && is_space(line[i])) ++i;
        const std::size_t start = i;
        while (i < line.size() && !is_space(line[i])) ++i;
        if (i > start) out.push_back(line.substr(start, i - start));
    }
    return out;
}

// The "DATE TIME - LEVEL - " of Python's logging.Formatter("%(asctime)s - %(levelname)s -
// %(message)s"), or the "LEVEL - " TE's documentation shows; nothing at all is taken too.
bool valid_prefix(const std::vector<std::string_view>& t, std::size_t n) {
    if (n == 0) return true;
    if (n < 2 || t[n - 1] != "-") return false;
    if (std::find(std::begin(kLevels), std::end(kLevels), t[n - 2]) == std::end(kLevels)) return false;
    return n == 2 || (n == 5 && t[2] == "-");
}

template <class T>
bool parse_number(std::string_view s, T& out) {
    const char* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, out);
    return ec == std::errc() && p == end;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// nvdlfw_inspect[_TIMESTAMP]_globalrank-N.log -> N; -1 otherwise.
int rank_of(const std::string& file_name) {
    constexpr std::string_view tag = "_globalrank-";
    const auto at = file_name.rfind(tag);
    if (at == std::string::npos || !ends_with(file_name, ".log")) return -1;
    const std::string_view digits =
        std::string_view(file_name).substr(at + tag.size(), file_name.size() - 4 - at - tag.size());
    int rank = -1;
    return !digits.empty() && parse_number(digits, rank) && rank >= 0 ? rank : -1;
}

class Interner {
public:
    explicit Interner(std::vector<std::string>& names) : names_(names) {
        for (std::size_t i = 0; i < names.size(); ++i) ids_.emplace(names[i], std::int32_t(i));
    }
    std::int32_t operator()(const std::string& name) {
        auto [it, added] = ids_.emplace(name, std::int32_t(names_.size()));
        if (added) names_.push_back(name);
        return it->second;
    }

private:
    std::vector<std::string>& names_;
    std::unordered_map<std::string, std::int32_t> ids_;
};

}  // namespace

std::string_view tensor_name(Tensor t) { return kTensorNames[static_cast<std::size_t>(t)]; }

StatName parse_stat(std::string_view stat) {
    static const std::pair<std::string_view, StatKind> plain[] = {
        {"min", StatKind::Min},          {"max", StatKind::Max},
        {"mean", StatKind::Mean},        {"std", StatKind::Std},
        {"l1_norm", StatKind::L1Norm},   {"l2_norm", StatKind::L2Norm},
        {"cur_amax", StatKind::CurAmax}, {"dynamic_range", StatKind::DynamicRange}};
    static const std::pair<std::string_view, StatKind> quantized[] = {
        {"underflows%", StatKind::Underflows},    {"overflows%", StatKind::Overflows},
        {"scale_inv_min", StatKind::ScaleInvMin}, {"scale_inv_max", StatKind::ScaleInvMax},
        {"mse", StatKind::Mse}};
    StatName out;
    for (auto [name, kind] : plain)
        if (stat == name) out.kind = kind;
    if (starts_with(stat, "max_blockwise_dynamic_range_block_size_")) out.kind = StatKind::BlockwiseDynamicRange;
    if (out.kind != StatKind::Unknown) return out;
    std::string_view rest = stat;
    if (ends_with(rest, "_columnwise")) {
        out.columnwise = true;
        rest.remove_suffix(std::string_view("_columnwise").size());
    }
    for (std::string_view r : kRecipes)
        if (starts_with(rest, r) && rest.size() > r.size() && rest[r.size()] == '_') {
            out.recipe = r;
            rest.remove_prefix(r.size() + 1);
            break;
        }
    for (auto [name, kind] : quantized)
        if (rest == name) {
            out.kind = kind;
            return out;
        }
    return StatName{};
}

MetricName split_metric(std::string_view metric) {
    // The rightmost _TENSOR_: no statistic name holds a tensor name, a layer name may.
    std::size_t best = std::string_view::npos;
    int tensor = -1;
    for (int t = 0; t < kTensorCount; ++t) {
        std::string needle(1, '_');
        needle.append(kTensorNames[t]);
        needle += '_';
        const auto at = metric.rfind(needle);
        if (at != std::string_view::npos && at > 0 && at + needle.size() < metric.size() &&
            (best == std::string_view::npos || at > best)) {
            best = at;
            tensor = t;
        }
    }
    if (tensor < 0) return {"", std::nullopt, std::string(metric)};
    const std::size_t stat = best + kTensorNames[tensor].size() + 2;
    return {std::string(metric.substr(0, best)), static_cast<Tensor>(tensor), std::string(metric.substr(stat))};
}

namespace {
std::string join_issues(const std::vector<Issue>& issues) {
    std::string s;
    constexpr std::size_t kShown = 20;
    for (std::size_t i = 0; i < issues.size() && i < kShown; ++i) {
        if (i) s += '\n';
        s += issues[i].str();
    }
    if (issues.size() > kShown) s += "\n... and " + std::to_string(issues.size() - kShown) + " more malformed lines";
    return s;
}
}  // namespace

LogError::LogError(std::vector<Issue> issues) : std::runtime_error(join_issues(issues)), issues_(std::move(issues)) {}

std::vector<LogFile> find_logs(const std::vector<std::string>& inputs) {
    std::vector<LogFile> out;
    for (const std::string& in : inputs) {
        std::error_code ec;
        const fs::file_status st = fs::status(in, ec);
        if (ec || !fs::exists(st)) throw std::runtime_error(in + ": no such file or directory");
        if (fs::is_regular_file(st)) {
            // Its neighbour of the same name holds the statistics; this one, messages.
            if (fs::absolute(in, ec).parent_path().filename() == kDebugFolder)
                throw std::runtime_error(in + ": a debug log of nvdlfw_inspect, not statistics (those are in " +
                                         std::string(kStatisticsFolder) + "/)");
            out.push_back({in, rank_of(fs::path(in).filename().string())});
            continue;
        }
        if (!fs::is_directory(st)) throw std::runtime_error(in + ": not a regular file or directory");
        std::size_t found = 0;
        for (auto it = fs::recursive_directory_iterator(in, fs::directory_options::skip_permission_denied, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            const fs::path& p = it->path();
            const std::string name = p.filename().string();
            if (p.parent_path().filename().string() != kStatisticsFolder || !starts_with(name, "nvdlfw_inspect")) continue;
            const int rank = rank_of(name);
            if (rank < 0 || !it->is_regular_file(ec)) continue;
            out.push_back({p.string(), rank});
            ++found;
        }
        if (ec) throw std::runtime_error(in + ": " + ec.message());
        if (found == 0)
            throw std::runtime_error(in + ": no Transformer Engine statistics log in it (" + std::string(kStatisticsFolder) +
                                     "/nvdlfw_inspect_globalrank-N.log)");
    }
    std::stable_sort(out.begin(), out.end(), [](const LogFile& a, const LogFile& b) {
        const unsigned ra = unsigned(a.rank), rb = unsigned(b.rank);  // unknown ranks (-1) last
        return ra != rb ? ra < rb : a.path < b.path;
    });
    // A file named twice (by itself and through its folder, or as ./a and a) is read once.
    std::vector<fs::path> seen;
    std::erase_if(out, [&](const LogFile& f) {
        std::error_code e;
        const fs::path p = fs::weakly_canonical(f.path, e);
        if (std::find(seen.begin(), seen.end(), p) != seen.end()) return true;
        seen.push_back(p);
        return false;
    });
    return out;
}

void parse_log(Log& log, std::int32_t file, std::istream& in, std::vector<Issue>& errors) {
    Interner layers(log.layers), stats(log.stats);
    const std::string& path = log.files.at(static_cast<std::size_t>(file)).path;
    std::int64_t number = 0;
    std::string line;
    while (std::getline(in, line)) {
        const bool complete = !in.eof();  // getline stopped at a newline, not at the end
        ++number;
        const auto t = tokens(line);
        if (t.empty()) continue;
        if (!complete) {
            log.notices.push_back({path, number, "incomplete last line (no newline: the log is still being written?) skipped"});
            break;
        }
        const std::size_t n = t.size();
        if (n < 3 || !starts_with(t[n - 2], "iteration=") || !starts_with(t[n - 1], "value=") || !valid_prefix(t, n - 3)) {
            errors.push_back({path, number, "not a statistics line (expected 'NAME iteration=N value=X'): " + excerpt(line)});
            continue;
        }
        Value v;
        v.file = file;
        v.line = number;
        const std::string_view iteration = t[n - 2].substr(10), value = t[n - 1].substr(6);
        if (!parse_number(iteration, v.iteration)) {
            errors.push_back({path, number, "iteration " + excerpt(iteration) + " is not an integer"});
            continue;
        }
        if (!parse_number(value, v.value)) {
            errors.push_back({path, number, "value " + excerpt(value) + " is not a number"});
            continue;
        }
        MetricName m = split_metric(t[n - 3]);
        if (!m.tensor) {
            log.warnings.push_back({path, number, "no tensor name (activation, weight, gradient, output, wgrad, dgrad) in " +
                                                      excerpt(t[n - 3]) + ": kept in /meta/te_log only"});
        } else {
            v.layer = layers(m.layer);
            v.tensor = static_cast<std::int8_t>(*m.tensor);
            if (parse_stat(m.stat).kind == StatKind::Unknown)
                log.warnings.push_back({path, number, "unknown statistic " + excerpt(m.stat) + " of " + m.layer + " " +
                                                          std::string(tensor_name(*m.tensor)) + ": kept in /meta/te_log only"});
        }
        v.stat = stats(m.stat);
        log.values.push_back(v);
    }
}

Log read_logs(const std::vector<LogFile>& files) {
    Log log;
    log.files = files;
    std::vector<Issue> errors;
    for (std::size_t f = 0; f < files.size(); ++f) {
        const std::string& path = files[f].path;
        std::error_code ec;
        if (!fs::is_regular_file(path, ec)) throw std::runtime_error(path + ": not a regular file");
        std::ifstream in(path, std::ios::binary);
        if (!in) throw std::runtime_error(path + ": cannot be opened");
        parse_log(log, std::int32_t(f), in, errors);
        if (in.bad()) throw std::runtime_error(path + ": cannot be read");
    }
    if (!errors.empty()) throw LogError(std::move(errors));
    return log;
}

}  // namespace fp8scope::te_log
