// What the user has picked, shared by all views: the run, the GEMM operands (from the
// layers table or any view's chooser), the analysis quantizer and the error statistic.
// Several operands can be picked at once (views that compare them draw them all); one of
// them is the current operand, for the views that show a single one.
#pragma once

#include <QObject>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

// The quantization-error statistics a view can show (FP8.md names).
enum class ErrorStat { SqnrDb, Mse, UnderflowPct, OverflowPct, Cosine, RelL2, MaxAbsErr };
const char* error_stat_name(ErrorStat s);
double error_stat_value(const ErrorFigures& e, ErrorStat s);
constexpr int kErrorStatCount = 7;

class Selection : public QObject {
    Q_OBJECT
public:
    explicit Selection(QObject* parent = nullptr) : QObject(parent) {}

    int run() const { return run_; }
    OperandRef operand() const { return operand_; }  // the current operand
    // Every picked operand in slot order, the current one included.
    const std::vector<OperandRef>& operands() const { return operands_; }
    ErrorStat stat() const { return stat_; }

    void setRun(int run);
    // Picks `ref` alone.
    void setOperand(OperandRef ref);
    // Picks `refs` (order and duplicates do not matter) with `current` as the current
    // operand; `current` is picked too when `refs` lacks it.
    void setOperands(std::vector<OperandRef> refs, OperandRef current);
    void setStat(ErrorStat s);

signals:
    void changed();

private:
    int run_ = 0;
    OperandRef operand_;
    std::vector<OperandRef> operands_{OperandRef{}};
    ErrorStat stat_ = ErrorStat::SqnrDb;
};

}  // namespace fp8scope::views
