// Findings as a table, and where each one is seen.
#include "models/findings_model.h"

#include <QColor>
#include <algorithm>

#include "finding_format.h"
#include "models/open_trace.h"
#include "trace_reader.h"

namespace fp8scope::views {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// The view that answers a finding's question: the loss for gaps, the events for rewinds and
// non-finite values, the amax for scale headroom, the outliers for kurtosis, and the error
// heatmap for what happened to an operand's cast; the outliers also for a SwiGLU's gate/up
// alignment (its plot there).
QString view_of(const std::string& kind) {
    if (kind == "loss_gap") return "loss";
    if (kind == "rewind" || kind == "nonfinite" || kind == "non_finite") return "events";
    if (kind.find("headroom") != std::string::npos || kind.find("scale_one") != std::string::npos) return "amax";
    if (kind.find("kurtosis") != std::string::npos || kind == "gate_up_alignment") return "outliers";
    return "error";
}

QColor severity_color(diagnose::Severity s) {
    switch (s) {
    case diagnose::Severity::Critical: return QColor(0xd6, 0x27, 0x28);
    case diagnose::Severity::Warning: return QColor(0xe0, 0x8a, 0x00);
    case diagnose::Severity::Info: break;
    }
    return QColor(0x55, 0x55, 0x55);
}

}  // namespace

FindingTarget finding_target(const diagnose::Finding& f) {
    FindingTarget t{view_of(f.kind), f.run, f.step, std::nullopt};
    if (f.linear >= 0 && f.operand) {
        // An operand without its GEMM: the first GEMM that reads it (x and w: fprop; dy: dgrad).
        const Gemm g = f.gemm ? *f.gemm : (*f.operand == Operand::DY ? Gemm::Dgrad : Gemm::Fprop);
        t.operand = OperandRef{f.linear, g, *f.operand};
    }
    return t;
}

DiagnosedTrace diagnose_file(const std::string& path) {
    // A large trace is diagnosed as the views read it: its newest steps (open_trace.h).
    const trace::TraceReader reader(path, {.min_step_rows = OpenTrace::kLargeStepRows, .tail_steps = OpenTrace::kTailSteps});
    DiagnosedTrace d{reader.meta(), diagnose::diagnose(reader), trace::read_attribution_table(path), reader.detail_from()};
    std::sort(d.attribution.begin(), d.attribution.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return d;
}

void FindingsModel::setFindings(DiagnosedTrace d) {
    beginResetModel();
    d_ = std::move(d);
    endResetModel();
}

QString FindingsModel::details(int row) const {
    const diagnose::Finding& f = finding(row);
    QString s = QStringLiteral("%1 (%2) %3: %4\n%5\n")
                    .arg(diagnose::severity_name(f.severity))
                    .arg(f.score, 0, 'f', 0)
                    .arg(q(f.kind), q(diagnose::finding_location(d_.meta, f)), q(f.summary));
    if (!f.figures.empty()) s += tr("figures: %1\n").arg(q(diagnose::figures_text(f.figures)));
    for (const std::string& line : f.context) s += QStringLiteral("- %1\n").arg(q(line));
    if (f.fix) {
        s += tr("fix: %1\n").arg(q(f.fix->summary));
        if (!f.fix->evidence.empty()) s += tr("evidence: %1\n").arg(q(diagnose::figures_text(f.fix->evidence)));
    }
    return s.trimmed();
}

QString FindingsModel::headline() const {
    int count[3] = {0, 0, 0};
    for (const auto& f : d_.findings) ++count[int(f.severity)];
    const int n = int(d_.findings.size());
    if (n == 0) return tr("no findings");
    return tr("%n finding(s): %1 critical, %2 warning, %3 info", nullptr, n).arg(count[2]).arg(count[1]).arg(count[0]);
}

int FindingsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : int(d_.findings.size());
}

int FindingsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant FindingsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const diagnose::Finding& f = finding(index.row());
    if (role == Qt::ToolTipRole) return details(index.row());
    if (role == Qt::ForegroundRole && index.column() == Severity) return severity_color(f.severity);
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
    case Severity: return QStringLiteral("%1 %2").arg(diagnose::severity_name(f.severity)).arg(f.score, 0, 'f', 0);
    case Kind: return q(f.kind);
    case Where: return q(diagnose::finding_location(d_.meta, f));
    case Summary: return q(f.summary);
    case Fix: return f.fix ? q(f.fix->summary) : QString();
    default: return {};
    }
}

QVariant FindingsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {"severity", "kind", "where", "summary", "suggested fix"};
    return section >= 0 && section < kColumns ? tr(names[section]) : QVariant();
}

}  // namespace fp8scope::views
