// `fp8scope-engine compact IN.h5 OUT.h5`: a trace rewritten in today's format (deflated
// chunks, bfloat16 channel absmax and block maps: docs/trace-format.md, "Storage"), then
// read back and compared with the input. IN is never written; OUT is removed when it does
// not read back the same.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "trace_compact.h"
#include "trace_records.h"

namespace fp8scope::cli {
namespace {

struct CompactOptions {
    std::string in, out;
    bool force = false;
};

int run_compact(const CompactOptions& o) {
    try {
        std::error_code ec;
        if (std::filesystem::exists(o.out, ec) && !o.force)
            throw trace::TraceError(o.out, "exists; --force replaces it");
        const trace::CompactCounts n = trace::compact_trace(o.in, o.out);
        if (const std::string d = trace::compare_traces(o.in, o.out); !d.empty()) {
            std::filesystem::remove(o.out, ec);
            throw trace::TraceError(o.out, "does not read back as " + o.in + " (" + d + "); removed");
        }
        const auto before = std::filesystem::file_size(o.in), after = std::filesystem::file_size(o.out);
        std::printf("%s -> %s: %llu -> %llu bytes (%.1fx smaller); %llu steps, %llu operands, %llu block maps, "
                    "%llu ops, %llu kernel sums read back the same\n",
                    o.in.c_str(), o.out.c_str(), (unsigned long long)before, (unsigned long long)after,
                    after ? double(before) / double(after) : 0.0, (unsigned long long)n.steps,
                    (unsigned long long)n.operands, (unsigned long long)n.blockmaps, (unsigned long long)n.ops,
                    (unsigned long long)n.kernel_steps);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

void add_compact(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<CompactOptions>();
    CLI::App* cmd = app.add_subcommand("compact", "Rewrite a trace in the current, compressed format and verify it");
    cmd->add_option("in", opts->in, "Trace to read (any format version); never written")->required();
    cmd->add_option("out", opts->out, "Trace to write")->required();
    cmd->add_flag("--force", opts->force, "Replace OUT when it exists (never IN)");
    cmd->callback([opts, &exit_code] { exit_code = run_compact(*opts); });
}

}  // namespace fp8scope::cli
