// The findings of a trace (capture/diagnose: what `fp8scope-engine diagnose` prints) as a
// table, most important first: severity, kind, where, summary and the suggested fix; the
// figures, context and the fix's evidence in each row's tooltip and in details(). Each
// finding names the view, run, step and operand that show it (FindingTarget).
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <optional>
#include <vector>

#include "attribution_table.h"
#include "finding.h"
#include "models/run_data.h"

namespace fp8scope::views {

// Where a finding is seen: a view ("loss", "error", ...), the run and step to put the
// cursor on, and the operand to pick (when the finding has one).
struct FindingTarget {
    QString view;
    int run = -1;
    std::int64_t step = -1;
    std::optional<OperandRef> operand;
};
FindingTarget finding_target(const diagnose::Finding& f);

// Runs diagnose() on a trace file: the findings, or throws trace::TraceError / std::exception.
struct DiagnosedTrace {
    trace::TraceMeta meta;
    std::vector<diagnose::Finding> findings;
    std::vector<trace::AttributionRecord> attribution;  // an attribute trace's groups, by rank
    // A large trace is diagnosed as an overview reads it (open_trace.h): its per-step
    // records from this step on, its capture steps whole; INT64_MIN: every step.
    std::int64_t detail_from = INT64_MIN;
};
DiagnosedTrace diagnose_file(const std::string& path);

class FindingsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Severity, Kind, Where, Summary, Fix, kColumns };
    using QAbstractTableModel::QAbstractTableModel;

    void setFindings(DiagnosedTrace d);
    const diagnose::Finding& finding(int row) const { return d_.findings.at(std::size_t(row)); }
    const std::vector<trace::AttributionRecord>& attribution() const { return d_.attribution; }
    // Every line of a finding: where, summary, figures, context, fix and its evidence.
    QString details(int row) const;
    // "3 findings: 1 critical, 1 warning, 1 info".
    QString headline() const;

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    DiagnosedTrace d_;
};

}  // namespace fp8scope::views
