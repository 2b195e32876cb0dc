// The rules behind diagnose(), each in its own file, and what they share: the trace's
// context and one operand's series, read once and handed to every per-operand rule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "finding.h"
#include "stats/gate_up_alignment.h"
#include "util/strprintf.h"

namespace fp8scope::diagnose {

struct Context {
    const trace::TraceReader& reader;
    const trace::TraceMeta& meta;
    Options options;
    int baseline = -1;                 // the baseline run, -1 none
    std::int64_t settle_end = 0;       // steps up to here are settling (capped at info)
    std::vector<std::int64_t> onset;   // per run: the step its loss gap left the noise band (-1 none)
    std::vector<std::vector<trace::GemmErrorRecord>> gemm_errors;  // per run
};

// One GEMM operand of one run over its capture steps.
struct Series {
    int run = 0, linear = 0;
    Gemm gemm = Gemm::Fprop;
    Operand operand = Operand::X;
    std::vector<trace::OperandPoint> points;
};

// The quantizer in use at a point, -1 when unquantized or out of range.
int in_use(const trace::OperandPoint& p);
double sqnr_of(const trace::OperandPoint& p);      // under the quantizer in use; NaN unquantized
double overflow_of(const trace::OperandPoint& p);
double underflow_of(const trace::OperandPoint& p);
double median(std::vector<double> v);  // NaN for none; NaNs left out
// The GEMM output's SQNR of a run's linear and GEMM at a step; NaN when not recorded.
double output_sqnr(const Context& c, int run, int linear, Gemm gemm, std::int64_t step);
// The score of a figure against its warning and critical bounds: below `warn` in the info
// band, between them in the warning band, past `critical` in the critical band.
double score_from(double value, double warn, double critical);
// Fills a finding's location from a series.
void locate(const Context& c, const Series& s, Finding& f);
std::string where(const Context& c, const Series& s);  // "x of blocks.1.mlp.fc2 (fprop)"

// What another recipe's what-if keeps on this operand over points [from, to]: a recipe whose
// quantizer keeps kFixMinGainDb more SQNR than the one in use, else an override keeping the
// linear in high precision. None when the operand is not quantized.
std::optional<Fix> what_if_fix(const Context& c, const Series& s, std::size_t from, std::size_t to);

// Rules over the whole trace.
void loss_gap(Context& c, std::vector<Finding>& out);         // rule 1; sets c.onset
void non_finite_losses(const Context& c, std::vector<Finding>& out);
void headroom(const Context& c, std::vector<Finding>& out);   // rule 4, from the per-step scaling table
void rewinds(const Context& c, std::vector<Finding>& out);     // rule 6, after every other rule
void attribution(const Context& c, std::vector<Finding>& out);  // /meta/attribution, when attribute wrote one
void gate_up_alignment(const Context& c, std::vector<Finding>& out);  // rule 8, from /gate_up_alignment

// Rules over one operand series; the ones that rank across operands keep candidates.
struct SeriesRules {
    std::vector<Finding> drift;        // rule 2 candidates, ranked per run afterwards
    std::vector<Finding> scale_one;    // rule 4's first steps on scale 1, one per run afterwards
    struct InjectionHarm {
        int entry = 0, run = 0;
        Finding finding;
    };
    std::vector<InjectionHarm> injections;  // rule 7, the most harmed operand per entry and run
    std::vector<int> injection_checked;     // entries with a series seen after their start
};
void drift(const Context& c, const Series& s, SeriesRules& r);                        // rule 2
void bursts(const Context& c, const Series& s, std::vector<Finding>& out);            // rule 3
void scale_one(const Context& c, const Series& s, SeriesRules& r);                    // rule 4
void kurtosis(const Context& c, const Series& s, std::vector<Finding>& out);          // rule 5
void non_finite_amax(const Context& c, const Series& s, std::vector<Finding>& out);
void injection(const Context& c, const Series& s, SeriesRules& r);                    // rule 7
// Rule 7's findings once every series was seen: a harm per entry and run, or that none was.
void injection_findings(const Context& c, SeriesRules& r, std::vector<Finding>& out);

}  // namespace fp8scope::diagnose
