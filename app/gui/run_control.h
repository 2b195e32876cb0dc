// Live runs for the main window: launching the engine, attaching to one, the Run menu's
// commands and what the user is told when something goes wrong. A launched run is
// attached through its live socket; when that is unavailable its trace file is followed.
#pragma once

#include <QObject>

#include "models/engine_process.h"
#include "models/live_source.h"
#include "models/series_store.h"

class QAction;
class QMenu;
class QWidget;
namespace fp8scope::views { class TraceFileLoader; }

class RunControl : public QObject {
    Q_OBJECT
public:
    RunControl(fp8scope::views::SeriesStore* store, fp8scope::views::TraceFileLoader* loader, QWidget* window);
    ~RunControl() override;

    void fillMenu(QMenu* menu);
    // Starts the engine and attaches (or follows its trace) as soon as it is up.
    bool launch(const fp8scope::views::LaunchSpec& spec);
    void attach(const QString& endpoint, const QString& token);
    // Imports a PyTorch capture folder into a new trace and follows it while the run
    // adds steps (the engine's `import --follow`).
    bool importCapture(const QString& folder);
    fp8scope::views::EngineProcess* engine() { return &engine_; }
    fp8scope::views::LiveSource* live() { return &live_; }
    // The run launched at startup: a small lock-step comparison with capture on.
    static fp8scope::views::LaunchSpec defaultSpec();
    // Asks the attached run to keep every kernel record of the next `steps` steps.
    void recordKernels(int steps);

signals:
    void message(const QString& text);  // for the status bar
    void error(const QString& text);    // for a dialog
    void sourceChanged(const QString& title);
    void liveChanged(bool attached);  // commands can be sent, or no longer

private:
    void send(fp8scope::live::CommandKind kind, const QString& what);
    void switchRecipe();
    void updateActions();

    fp8scope::views::SeriesStore* store_;
    fp8scope::views::TraceFileLoader* loader_;
    QWidget* window_;
    fp8scope::views::EngineProcess engine_;
    fp8scope::views::LiveSource live_;
    QList<QAction*> live_actions_;
    QAction* stop_engine_ = nullptr;
};
