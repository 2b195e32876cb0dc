// Transformer Engine statistics logs -> trace, as a subcommand's work.
#include "te_log_import.h"

#include <cstdio>
#include <exception>
#include <filesystem>

#include "te_log.h"
#include "te_log_trace.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

// The first few of a kind, then how many more: a custom feature can log thousands.
void print_issues(const char* kind, const std::vector<te_log::Issue>& issues) {
    constexpr std::size_t kShown = 10;
    for (std::size_t i = 0; i < issues.size() && i < kShown; ++i)
        std::fprintf(stderr, "fp8scope-engine: %s: %s\n", kind, issues[i].str().c_str());
    if (issues.size() > kShown)
        std::fprintf(stderr, "fp8scope-engine: %s: ... and %zu more lines like these\n", kind, issues.size() - kShown);
}

}  // namespace

int run_te_log_import(const std::vector<std::string>& inputs, const std::string& out, bool force) {
    if (inputs.empty() || out.empty()) {
        std::fprintf(stderr, "fp8scope-engine: error: import --te-log needs log files or folders and --out FILE\n");
        return 2;
    }
    try {
        std::error_code ec;
        if (std::filesystem::exists(out, ec) && !force) throw std::runtime_error(out + ": exists; --force replaces it");
        const auto files = te_log::find_logs(inputs);
        const te_log::Log log = te_log::read_logs(files);
        print_issues("note", log.notices);
        print_issues("warning", log.warnings);
        const te_log::ImportCounts n = te_log::write_trace(log, te_log::convert(log, kEngineVersion), out);
        std::printf("%s: %zu values of %zu statistics logs: %zu runs (one per log), %zu linears, %zu steps "
                    "(%lld..%lld), %zu operand records\n",
                    out.c_str(), n.values, files.size(), n.runs, n.linears, n.steps, (long long)n.first_step,
                    (long long)n.last_step, n.operands);
    } catch (const te_log::LogError& e) {
        print_issues("error", e.issues());
        std::fprintf(stderr, "fp8scope-engine: error: %zu malformed lines; nothing written\n", e.issues().size());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace fp8scope::cli
