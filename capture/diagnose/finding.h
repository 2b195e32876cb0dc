// Findings: what `fp8scope-engine diagnose` (and the GUI's findings) conclude from a trace.
// A finding says what went wrong or what stands out, where (run, steps, layer, linear,
// GEMM, operand), how bad (a severity score and its label), the figures it rests on, and
// what would fix it, with the what-if figures of the same tensors as evidence.
// diagnose() reads a trace through TraceReader only, one run's operand series at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "operands.h"
#include "trace_reader.h"

namespace fp8scope::diagnose {

enum class Severity { Info, Warning, Critical };
const char* severity_name(Severity s);  // "info", "warning", "critical"

// A named figure: "sqnr_before_db" 28.5.
using Figure = std::pair<std::string, double>;

// What would fix a finding: train under another recipe, or override the precision of
// some linears (a custom recipe's override, --keep-high-precision).
struct Fix {
    std::string summary;   // one line, with the figures that back it
    std::string recipe;    // a recipe to train with; empty when the fix is an override
    std::string override;  // a linear name pattern to keep in high precision; empty otherwise
    std::vector<Figure> evidence;  // the what-if figures of the same tensors
};

struct Finding {
    std::string kind;  // "injection", "loss_gap", "operand_drift", "overflow_burst", ... (README)
    double score = 0;  // 0..100; the label follows from it (severity_of)
    Severity severity = Severity::Info;
    // Where: -1 (or none) where a field does not apply.
    int run = -1;
    std::int64_t step = -1, step_end = -1;  // one step (step_end = step) or a range
    int layer = -1, linear = -1;
    std::optional<Gemm> gemm;
    std::optional<Operand> operand;
    int block = -1;  // a block of the operand's scale grid; -1: the whole tensor
    std::string summary;          // one line
    std::vector<Figure> figures;  // the figures the finding rests on
    std::vector<std::string> context;  // further lines: what preceded a rewind, ...
    std::optional<Fix> fix;
};

struct Options {
    // Steps before a rewind whose findings are listed as what preceded it.
    std::int64_t rewind_lookback = -1;  // -1: diagnose_rules.h's kRewindLookbackCaptures capture intervals
    // At most this many findings of one kind (the strongest); 0: all.
    int max_per_kind = 0;
};

// Severity label of a score: info below kWarningScore, critical from kCriticalScore.
Severity severity_of(double score);

// Every finding of the trace, most important first (score, then earlier step). Throws
// TraceError for a damaged trace.
std::vector<Finding> diagnose(const trace::TraceReader& reader, const Options& options = {});

}  // namespace fp8scope::diagnose
