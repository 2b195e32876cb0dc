// `fp8scope-engine inspect TRACE`: a summary of a trace: runs, steps, layers, quantizers,
// events, and the worst tensors by SQNR and by overflow under the quantizer in use; for a
// comparison trained with several seeds, every recipe's gap to the baseline over the seeds.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "commands.h"
#include "seed_summary.h"
#include "trace_reader.h"

namespace fp8scope::cli {
namespace {

using namespace trace;

struct InspectOptions {
    std::string trace;
    int top = 10;
};

// The GEMMs of a run that an override of its recipe set (its precision plan), one line
// per linear: "  override blocks.7.attn.qkv fprop+dgrad+wgrad: baseline (high precision)".
void print_overrides(const TraceMeta& m, int run) {
    const std::vector<GemmPrecision> plan = run_precision(m, run);
    for (std::size_t l = 0; l < m.linears.size() && !plan.empty(); ++l) {
        std::map<std::string, std::string> gemms;  // recipe -> GEMMs
        for (int g = 0; g < 3; ++g) {
            const GemmPrecision& p = plan[l * 3 + std::size_t(g)];
            if (!p.overridden) continue;
            std::string& list = gemms[p.recipe + (p.a.empty() && p.b.empty() ? " (high precision)" : "")];
            list += (list.empty() ? "" : "+") + std::string(gemm_name(p.gemm));
        }
        for (const auto& [recipe, list] : gemms)
            std::printf("  override %s %s: %s\n", m.linears[l].name.c_str(), list.c_str(), recipe.c_str());
    }
}

struct Worst {
    int run;
    std::int64_t step;
    OperandKey key;
    std::string gemms;  // "fprop", or "fprop+wgrad" when both GEMMs' casts have these figures
    std::string quantizer;
    double sqnr, overflow;
};

const char* gemm_str(Gemm g) { return g == Gemm::Fprop ? "fprop" : g == Gemm::Dgrad ? "dgrad" : "wgrad"; }
const char* operand_str(Operand o) { return o == Operand::X ? "x" : o == Operand::W ? "w" : "dy"; }

int run_inspect(const InspectOptions& o) {
    try {
        TraceReader r(o.trace);
        const TraceMeta& m = r.meta();
        std::printf("%s: fp8scope trace v%d, %s, created %s on %s\n", o.trace.c_str(), m.format_version,
                    m.tool_version.c_str(), m.created.c_str(), m.machine.c_str());
        // 64-bit: a layer id read from the file may be INT32_MAX.
        std::printf("linears %zu (layers %lld), quantizers %zu, capture every %lld, block maps every %lld\n",
                    m.linears.size(),
                    m.linears.empty() ? 0LL : 1LL + std::max_element(m.linears.begin(), m.linears.end(), [](auto& a, auto& b) {
                                                      return a.layer < b.layer;
                                                  })->layer,
                    m.quantizers.size(), (long long)m.capture_every, (long long)m.blockmap_every);
        // Format 5 and older kept every kernel record.
        if (m.kernel_timings.empty())
            std::printf("kernel timings: every record (format %d)\n", m.format_version);
        else if (m.kernel_timings == "all" || m.kernel_timings == "off")
            std::printf("kernel timings: %s\n", m.kernel_timings.c_str());
        else
            std::printf("kernel timings: %s, window %lld steps; sums every step\n", m.kernel_timings.c_str(),
                        (long long)m.kernel_window);
        if (m.world_size > 1) {
            // Traces from before grad_dtype was recorded do not say the type.
            const std::string sums = m.grad_dtype.empty() ? "" : ", gradient sums in " + m.grad_dtype;
            std::printf("data-parallel: written by rank %d of %d%s, rank step records %zu\n", m.rank, m.world_size,
                        sums.c_str(), r.rank_steps().size());
        }
        std::vector<Worst> all;
        // A tensor cast the same way for both its GEMMs (per-tensor scales) is listed once.
        std::map<std::tuple<int, std::int64_t, int, Operand>, std::size_t> seen;
        std::vector<stats::RunLosses> losses(m.runs.size());  // for the seeds' gap table
        for (int run = 0; run < (int)m.runs.size(); ++run) {
            auto steps = r.steps(run);
            for (const StepRecord& s : steps) {
                losses[std::size_t(run)].step.push_back(double(s.step));
                losses[std::size_t(run)].loss.push_back(s.loss);
                losses[std::size_t(run)].eval.push_back(s.eval_loss);
            }
            auto caps = r.capture_steps(run);
            std::printf("run %d %-12s steps %zu (last %lld)", run, m.runs[run].name.c_str(), steps.size(),
                        (long long)r.last_step(run));
            if (!steps.empty()) std::printf(", loss %.4f", steps.back().loss);
            std::printf(", capture steps %zu, block-map steps %zu\n", caps.size(), r.blockmap_steps(run).size());
            // The most damaged GEMM output at the run's last capture step that has output errors.
            const auto outputs = r.gemm_errors(run);
            const GemmErrorRecord* worst = nullptr;
            for (const auto& g : outputs)
                if (g.step == outputs.back().step && (!worst || g.sqnr_db < worst->sqnr_db)) worst = &g;
            if (worst && std::isinf(worst->sqnr_db))  // no quantized operand: no second GEMM, no error
                std::printf("  GEMM outputs at step %lld: exact (no quantized operand)\n", (long long)worst->step);
            else if (worst)
                std::printf("  worst GEMM output at step %lld: %s %s, SQNR %.2f dB, rel. error %.3g\n",
                            (long long)worst->step, m.linears[worst->linear].name.c_str(), gemm_str(worst->gemm),
                            worst->sqnr_db, worst->rel_err);
            print_overrides(m, run);
            for (auto step : caps)
                for (const auto& op : r.operands(run, step)) {
                    if (op.quantizer_in_use < 0 || op.quantizer_in_use >= (int)op.errors.size()) continue;
                    const ErrorStats& e = op.errors[op.quantizer_in_use];
                    auto [it, fresh] = seen.try_emplace({run, step, op.key.linear, op.key.operand}, all.size());
                    if (!fresh) {
                        Worst& w = all[it->second];
                        if (w.sqnr == e.sqnr_db && w.overflow == e.overflow_pct) {
                            w.gemms += std::string("+") + gemm_str(op.key.gemm);
                            continue;
                        }
                    }
                    all.push_back({run, step, op.key, gemm_str(op.key.gemm), m.quantizers[op.quantizer_in_use], e.sqnr_db,
                                   e.overflow_pct});
                }
        }
        if (const std::optional<trace::SeedGaps> seeds = trace::seed_gaps(m, losses)) {
            print_seed_table(*seeds);
            std::printf("\n");
        }
        std::printf("quantizers:");
        for (const auto& n : m.quantizers) std::printf(" %s", n.c_str());
        std::printf("\n");
        auto events = r.events();
        std::printf("events %zu\n", events.size());
        for (const auto& e : events)
            std::printf("  step %-6lld %-16s %s %s\n", (long long)e.step, event_kind_name(e.kind),
                        e.run >= 0 ? m.runs.at(e.run).name.c_str() : "", e.detail.c_str());
        auto print = [&](const char* title, auto better) {
            std::vector<Worst> v = all;
            std::sort(v.begin(), v.end(), better);
            std::printf("%s\n", title);
            if (v.empty()) std::printf("  (no quantized operands captured)\n");
            for (std::size_t i = 0; i < v.size() && (int)i < o.top; ++i)
                std::printf("  %-10s step %-6lld %-28s %-11s %-2s %-24s sqnr %8.2f dB  overflow %.4f%%\n",
                            m.runs[v[i].run].name.c_str(), (long long)v[i].step, m.linears[v[i].key.linear].name.c_str(),
                            v[i].gemms.c_str(), operand_str(v[i].key.operand), v[i].quantizer.c_str(), v[i].sqnr,
                            v[i].overflow);
        };
        // NaN SQNR (an all-zero tensor) sorts last.
        print("worst by sqnr (quantizer in use):", [](const Worst& a, const Worst& b) {
            return std::isnan(b.sqnr) ? !std::isnan(a.sqnr) : (!std::isnan(a.sqnr) && a.sqnr < b.sqnr);
        });
        print("worst by overflow (quantizer in use):",
              [](const Worst& a, const Worst& b) { return a.overflow > b.overflow; });
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

void add_inspect(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<InspectOptions>();
    CLI::App* cmd = app.add_subcommand("inspect", "Summarise a trace: runs, steps, layers, quantizers, worst tensors");
    cmd->add_option("trace", opts->trace, "HDF5 trace written by train --out")->required();
    cmd->add_option("--top", opts->top, "Tensors in each worst list")->check(CLI::PositiveNumber);
    cmd->callback([opts, &exit_code] { exit_code = run_inspect(*opts); });
}

}  // namespace fp8scope::cli
