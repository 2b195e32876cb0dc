// What the user has picked, shared by all views: the run, the GEMM operand (from the
// layers table or any view's chooser), the analysis recipe and the error statistic.
#pragma once

#include <QObject>

#include "run_data.h"

namespace fp8scope::views {

// The quantization-error statistics a view can show (FP8.md names).
enum class ErrorStat { SqnrDb, Mse, UnderflowPct, OverflowPct, Cosine, RelL2, MaxAbsErr };
const char* error_stat_name(ErrorStat s);
double error_stat_value(const ErrorStats& e, ErrorStat s);
constexpr int kErrorStatCount = 7;

class Selection : public QObject {
    Q_OBJECT
public:
    explicit Selection(QObject* parent = nullptr) : QObject(parent) {}

    int run() const { return run_; }
    OperandRef operand() const { return operand_; }
    ErrorStat stat() const { return stat_; }

    void setRun(int run);
    void setOperand(OperandRef ref);
    void setStat(ErrorStat s);

signals:
    void changed();

private:
    int run_ = 0;
    OperandRef operand_;
    ErrorStat stat_ = ErrorStat::SqnrDb;
};

}  // namespace fp8scope::views
