// Selection setters and the error statistics by name.
#include "models/selection.h"

#include <algorithm>

namespace fp8scope::views {

const char* error_stat_name(ErrorStat s) {
    switch (s) {
        case ErrorStat::SqnrDb: return "sqnr_db";
        case ErrorStat::Mse: return "mse";
        case ErrorStat::UnderflowPct: return "underflow_pct";
        case ErrorStat::OverflowPct: return "overflow_pct";
        case ErrorStat::Cosine: return "cosine";
        case ErrorStat::RelL2: return "rel_l2";
        case ErrorStat::MaxAbsErr: return "max_abs_err";
    }
    return "";
}

double error_stat_value(const ErrorFigures& e, ErrorStat s) {
    switch (s) {
        case ErrorStat::SqnrDb: return e[&ErrorStats::sqnr_db];
        case ErrorStat::Mse: return e[&ErrorStats::mse];
        case ErrorStat::UnderflowPct: return e[&ErrorStats::underflow_pct];
        case ErrorStat::OverflowPct: return e[&ErrorStats::overflow_pct];
        case ErrorStat::Cosine: return e[&ErrorStats::cosine];
        case ErrorStat::RelL2: return e[&ErrorStats::rel_l2];
        case ErrorStat::MaxAbsErr: return e[&ErrorStats::max_abs_err];
    }
    return 0;
}

void Selection::setRun(int run) {
    if (run == run_) return;
    run_ = run;
    emit changed();
}

void Selection::setOperand(OperandRef ref) { setOperands({ref}, ref); }

void Selection::setOperands(std::vector<OperandRef> refs, OperandRef current) {
    refs.push_back(current);
    std::sort(refs.begin(), refs.end(), slot_order);
    refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
    if (current == operand_ && refs == operands_) return;
    operand_ = current;
    operands_ = std::move(refs);
    emit changed();
}

void Selection::setStat(ErrorStat s) {
    if (s == stat_) return;
    stat_ = s;
    emit changed();
}

}  // namespace fp8scope::views
