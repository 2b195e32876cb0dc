// Figures of one operand series shared by the rules: the quantizer in use, its error
// figures, the GEMM output error, medians and scores, and where a finding points.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "diagnose_rules.h"
#include "rules.h"

namespace fp8scope::diagnose {

int in_use(const trace::OperandPoint& p) {
    return p.quantizer_in_use >= 0 && std::size_t(p.quantizer_in_use) < p.errors.size() ? p.quantizer_in_use : -1;
}
double sqnr_of(const trace::OperandPoint& p) { return in_use(p) < 0 ? NAN : p.errors[std::size_t(in_use(p))].sqnr_db; }
double overflow_of(const trace::OperandPoint& p) {
    return in_use(p) < 0 ? NAN : p.errors[std::size_t(in_use(p))].overflow_pct;
}
double underflow_of(const trace::OperandPoint& p) {
    return in_use(p) < 0 ? NAN : p.errors[std::size_t(in_use(p))].underflow_pct;
}

double median(std::vector<double> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
    if (v.empty()) return NAN;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double output_sqnr(const Context& c, int run, int linear, Gemm gemm, std::int64_t step) {
    if (run < 0 || std::size_t(run) >= c.gemm_errors.size()) return NAN;
    double v = NAN;  // the last row wins: a step recorded again after a rewind
    for (const auto& g : c.gemm_errors[std::size_t(run)])
        if (g.step == step && g.linear == linear && g.gemm == gemm) v = g.sqnr_db;
    return v;
}

double score_from(double value, double warn, double critical) {
    using namespace rules;
    if (!(value > 0)) return 0;
    if (value < warn) return kWarningScore * value / warn;
    if (value < critical) return kWarningScore + (kCriticalScore - kWarningScore) * (value - warn) / (critical - warn);
    return std::min(kNonFiniteScore - 1, kCriticalScore + 10 * std::log2(value / critical));
}

void locate(const Context& c, const Series& s, Finding& f) {
    f.run = s.run;
    f.linear = s.linear;
    f.layer = c.meta.linears.at(std::size_t(s.linear)).layer;
    f.gemm = s.gemm;
    f.operand = s.operand;
}

std::string where(const Context& c, const Series& s) {
    return strprintf("%s of %s (%s)", std::string(operand_name(s.operand)).c_str(),
               c.meta.linears.at(std::size_t(s.linear)).name.c_str(), std::string(gemm_name(s.gemm)).c_str());
}

}  // namespace fp8scope::diagnose
