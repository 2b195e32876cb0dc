// `fp8scope-engine diagnose TRACE [--json]`: the trace's findings (capture/diagnose), most
// important first: whether a recipe's loss gap is real, where it started, which operands
// changed, injected faults, overflow, headroom, kurtosis, rewinds, each with its figures
// and a fix backed by the what-if statistics of the same tensors.
#include <cstdio>
#include <string>

#include "commands.h"
#include "finding.h"
#include "finding_format.h"
#include "trace_reader.h"

namespace fp8scope::cli {
namespace {

struct DiagnoseOptions {
    std::string trace;
    bool json = false;
    std::string min_severity = "info";
    int max_per_kind = 0;
};

int run_diagnose(const DiagnoseOptions& o) {
    try {
        const trace::TraceReader reader(o.trace);
        diagnose::Options opts;
        opts.max_per_kind = o.max_per_kind;
        std::vector<diagnose::Finding> found = diagnose::diagnose(reader, opts);
        const diagnose::Severity least = o.min_severity == "critical" ? diagnose::Severity::Critical
                                         : o.min_severity == "warning" ? diagnose::Severity::Warning
                                                                       : diagnose::Severity::Info;
        std::erase_if(found, [&](const diagnose::Finding& f) { return f.severity < least; });
        if (o.json) std::printf("%s\n", diagnose::findings_json(reader, found).dump(2).c_str());
        else std::fputs(diagnose::findings_text(reader, found).c_str(), stdout);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

void add_diagnose(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<DiagnoseOptions>();
    CLI::App* cmd = app.add_subcommand("diagnose", "Findings of a trace, ranked, each with its evidence and a fix");
    cmd->add_option("trace", opts->trace, "HDF5 trace written by train --out")->required();
    cmd->add_flag("--json", opts->json, "Print the findings as JSON");
    cmd->add_option("--min-severity", opts->min_severity, "Leave out findings below: info, warning or critical")
        ->check(CLI::IsMember({"info", "warning", "critical"}));
    cmd->add_option("--max-per-kind", opts->max_per_kind, "At most this many findings of each kind (0: all)")
        ->check(CLI::NonNegativeNumber);
    cmd->callback([opts, &exit_code] { exit_code = run_diagnose(*opts); });
}

}  // namespace fp8scope::cli
