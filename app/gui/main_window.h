// The main window: a thin composition. It owns the series store, the step cursor and the
// selection, hands the views to DockLayout, and wires menus to the loader, the exporters
// and the help dialogs. It draws nothing itself.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <memory>

#include "models/selection.h"
#include "models/series_store.h"
#include "models/step_cursor.h"
#include "widgets/view_set.h"

class CursorBar;
class DockLayout;
class RunControl;
class QLabel;
class QMenu;
namespace fp8scope::views {
class ReportModel;
class StepKeys;
class TraceFileLoader;
}  // namespace fp8scope::views

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // `saved_layout`: restore the user's window and dock layout (screenshots do not).
    explicit MainWindow(bool saved_layout = true);
    ~MainWindow() override;

    // Shows the window where the user left it, else maximised (a first start): never at
    // the size of whatever the empty window holds.
    void showAtStart();
    // Brings a view's dock to the front (screenshots); false when the view is unknown.
    bool raiseView(const QString& name);

    // Opens a trace on a worker thread and follows it while it grows; errors end in a
    // message, never a crash. Several traces open as one comparison.
    void openTrace(const QString& path) { openTraces({path}); }
    void openTraces(const QStringList& paths);
    // A trace opened next with at least `rows` step records opens as an overview of a large
    // trace (TraceFileLoader::setLargeStepRows).
    void setLargeStepRows(std::uint64_t rows);
    // Adds a trace to the open one(s): its runs overlay in every view.
    void openComparison(const QString& path);
    // Blocks until the load is over (finished or failed) and every view is redrawn, with what
    // the views asked for as they drew (a large trace's records of the steps shown)
    // (screenshots); a negative timeout waits for as long as it takes. True when the load
    // ended in time.
    bool waitUntilLoaded(int timeout_ms);
    fp8scope::views::ViewSet* viewSet() { return views_.get(); }
    RunControl* runControl() { return run_; }
    fp8scope::views::Selection* selection() { return &selection_; }
    fp8scope::views::StepCursor* cursor() { return &cursor_; }
    const fp8scope::views::SeriesStore& store() const { return store_; }
    QString lastError() const { return last_error_; }
    // An analyze report is open: the report presentation replaces the training views.
    bool showsReport() const;

protected:
    void closeEvent(QCloseEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void buildMenus();
    void rebuildRecentMenu();
    void showError(const QString& message);
    void openReport(const QString& path);
    // The start page, the report or the training views, whichever the open file calls for.
    void showPresentation();
    fp8scope::views::StoreView* currentView() const;

    fp8scope::views::SeriesStore store_;
    fp8scope::views::StepCursor cursor_;
    fp8scope::views::Selection selection_;
    std::unique_ptr<fp8scope::views::ViewSet> views_;
    std::unique_ptr<fp8scope::views::TraceFileLoader> loader_;
    RunControl* run_;
    CursorBar* bar_;
    DockLayout* docks_;
    fp8scope::views::StepKeys* keys_;
    QLabel* start_page_;
    fp8scope::views::ReportModel* report_;
    QWidget* report_view_;
    QMenu* recent_menu_;
    QStringList paths_;    // the traces open, the first is the main one
    QStringList opening_;  // the traces being opened: they become paths_ once readable
    bool placed_ = false;  // the saved window geometry was restored
    bool loading_ = false;
    QString last_error_;
};
