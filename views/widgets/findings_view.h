// Findings view: what `fp8scope-engine diagnose` concludes from the open trace, most
// important first, each with its figures and a suggested fix. Activating a finding picks
// its run and operand, moves the step cursor to its step and asks for the view that shows
// it (showView). The trace is diagnosed off the GUI thread, again when it grows. A trace
// from `fp8scope-engine attribute` also gets its groups drawn: the share of the recipe's
// loss gap each one's high precision recovered, the chosen set highlighted.
#pragma once

#include <QTimer>
#include <future>

#include "models/findings_model.h"
#include "widgets/store_view.h"

class QCustomPlot;
class QLabel;
class QPlainTextEdit;
class QTableView;

namespace fp8scope::views {

class FindingsView : public StoreView {
    Q_OBJECT
public:
    explicit FindingsView(const ViewContext& ctx, QWidget* parent = nullptr);
    ~FindingsView() override;

    // The trace file to diagnose (empty: none, e.g. a live run without one).
    void setTracePath(const QString& path);
    // Waits for a diagnosis in progress (tests, screenshots); false on timeout.
    bool waitForFindings(int timeout_ms);
    const QAbstractItemModel* table() const override { return &model_; }
    const FindingsModel& model() const { return model_; }
    QTableView* tableView() const { return table_; }
    // The attribution plot: shown for a trace `fp8scope-engine attribute` wrote.
    QCustomPlot* attributionPlot() const { return attribution_; }
    void jumpTo(int row);

signals:
    void showView(const QString& name);

protected:
    void redraw() override;

private:
    void start();
    void collect();  // takes a finished diagnosis
    void showDetails(int row);
    void drawAttribution();

    FindingsModel model_;
    QLabel* headline_;
    QTableView* table_;
    QPlainTextEdit* details_;
    QCustomPlot* attribution_;
    QString path_;
    std::future<DiagnosedTrace> job_;
    QTimer poll_;
    bool again_ = false;        // the trace grew while a diagnosis ran
    std::uint64_t grown_ = 0;   // store revisions seen since the last diagnosis
};

}  // namespace fp8scope::views
