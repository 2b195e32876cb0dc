// The main window: a thin composition. It owns the series store, the step cursor and the
// selection, puts every view of a ViewSet in a dock, and wires menus to the loader and
// the exporters. It draws nothing itself.
#pragma once

#include <QMainWindow>
#include <memory>

#include "models/selection.h"
#include "models/series_store.h"
#include "models/step_cursor.h"
#include "widgets/view_set.h"

class CursorBar;
class RunControl;
class QLabel;
class QMenu;
namespace fp8scope::views { class TraceFileLoader; }

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    MainWindow();
    ~MainWindow() override;

    // Opens a trace on a worker thread and follows it while it grows; errors end in a
    // message, never a crash.
    void openTrace(const QString& path);
    // Blocks until a running load is over and every view is redrawn (screenshots).
    bool waitUntilLoaded(int timeout_ms);
    fp8scope::views::ViewSet* viewSet() { return views_.get(); }
    RunControl* runControl() { return run_; }
    fp8scope::views::Selection* selection() { return &selection_; }
    const fp8scope::views::SeriesStore& store() const { return store_; }
    QString lastError() const { return last_error_; }

protected:
    void closeEvent(QCloseEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void buildMenus();
    void rememberRecent(const QString& path);
    void rebuildRecentMenu();
    void showError(const QString& message);
    fp8scope::views::StoreView* currentView() const;

    fp8scope::views::SeriesStore store_;
    fp8scope::views::StepCursor cursor_;
    fp8scope::views::Selection selection_;
    std::unique_ptr<fp8scope::views::ViewSet> views_;
    std::unique_ptr<fp8scope::views::TraceFileLoader> loader_;
    RunControl* run_;
    CursorBar* bar_;
    QLabel* start_page_;
    QMenu* recent_menu_;
    QString last_error_;
};
