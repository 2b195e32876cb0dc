// Run control: engine process, live source and Run menu wiring. Every failure ends in a
// message; the window keeps whatever it was showing.
#include "run_control.h"

#include <QFileInfo>
#include <QInputDialog>
#include <QMenu>

#include "attach_dialog.h"
#include "launch_dialog.h"
#include "models/trace_file_loader.h"
#include "switch_recipe_dialog.h"

using namespace fp8scope::views;
using fp8scope::live::CommandKind;

RunControl::RunControl(SeriesStore* store, TraceFileLoader* loader, QWidget* window)
    : QObject(window), store_(store), loader_(loader), window_(window), live_(store) {
    connect(&engine_, &EngineProcess::socketReady, this, [this](const QString& endpoint) {
        attach(endpoint, engine_.spec().token);
    });
    connect(&engine_, &EngineProcess::traceReady, this, [this](const QString& path) {
        if (live_.isAttached() || !engine_.spec().socket.isEmpty()) return;  // the stream serves it
        loader_->openGrowing(path);
        emit sourceChanged(QFileInfo(path).fileName() + tr(" (following)"));
    });
    connect(&engine_, &EngineProcess::failed, this, [this](const QString& m) {
        emit error(m);
        updateActions();
    });
    connect(&engine_, &EngineProcess::finished, this, [this](const QString& m) {
        emit message(m);
        updateActions();
    });
    connect(&live_, &DataSource::opened, this, [this](const QString& endpoint) {
        emit message(tr("attached to %1").arg(endpoint));
        emit sourceChanged(endpoint);
        updateActions();
    });
    connect(&live_, &DataSource::failed, this, [this](const QString&, const QString& m) {
        emit error(m);
        // A launched run that cannot be attached is still readable from its trace file.
        if (engine_.running() && QFileInfo(engine_.spec().out).size() > 0) {
            loader_->openGrowing(engine_.spec().out);
        }
        updateActions();
    });
    connect(&live_, &DataSource::closed, this, [this](const QString&, const QString& why) {
        emit message(tr("live stream closed: %1").arg(why));
        // The socket is gone: name what stays, the run's trace file when it wrote one.
        const QString out = engine_.spec().out;
        emit sourceChanged(out.isEmpty() ? tr("run ended") : tr("%1 (run ended)").arg(QFileInfo(out).fileName()));
        updateActions();
    });
    connect(&live_, &LiveSource::replied, this, [this](const QString& what, bool ok, const QString& err) {
        if (ok) emit message(tr("%1: done").arg(what));
        else emit error(tr("%1 refused: %2").arg(what, err));
    });
}

RunControl::~RunControl() {
    live_.close();
    engine_.stop(2000);
}

LaunchSpec RunControl::defaultSpec() {
    LaunchSpec s;
    s.preset = "tiny";
    s.steps = 400;
    s.capture_every = 10;
    s.recipes = LaunchSpec::kDefaultLockStep;
    s.out = default_trace_path();
    s.socket = "unix:" + QFileInfo(s.out).absolutePath() + "/" + QFileInfo(s.out).completeBaseName() + ".sock";
    return s;
}

bool RunControl::launch(const LaunchSpec& spec) {
    live_.close();
    const bool ok = engine_.start(spec);
    if (ok && !spec.import_dir.isEmpty()) emit message(tr("importing %1 into %2").arg(spec.import_dir, spec.out));
    else if (ok) emit message(tr("engine started: %1").arg(spec.recipes.join(", ")));
    updateActions();
    return ok;
}

bool RunControl::importCapture(const QString& folder) {
    LaunchSpec s;
    s.import_dir = folder;
    s.out = default_trace_path();
    return launch(s);
}

void RunControl::attach(const QString& endpoint, const QString& token) {
    emit message(tr("connecting to %1 ...").arg(endpoint));
    live_.attach(endpoint, token);
}

void RunControl::fillMenu(QMenu* menu) {
    menu->addAction(tr("&Launch run..."), this, [this] {
        LaunchSpec initial = defaultSpec();
        LaunchDialog d(initial, window_);
        if (d.exec() != QDialog::Accepted) return;
        LaunchSpec s = d.spec();
        s.socket = initial.socket;
        launch(s);
    });
    menu->addAction(tr("&Attach to engine..."), this, [this] {
        AttachDialog d(window_);
        if (d.exec() == QDialog::Accepted) attach(d.endpoint(), d.token());
    });
    live_actions_ << menu->addAction(tr("&Detach"), this, [this] {
        live_.close();
        emit message(tr("detached"));
        emit sourceChanged(tr("detached"));
        updateActions();
    });
    menu->addSeparator();
    live_actions_ << menu->addAction(tr("&Switch recipe..."), this, &RunControl::switchRecipe);
    live_actions_ << menu->addAction(tr("&Pause"), this, [this] { send(CommandKind::Pause, tr("pause")); });
    live_actions_ << menu->addAction(tr("&Resume"), this, [this] { send(CommandKind::Resume, tr("resume")); });
    live_actions_ << menu->addAction(tr("S&top run"), this, [this] { send(CommandKind::Stop, tr("stop")); });
    live_actions_ << menu->addAction(tr("&Checkpoint now"), this, [this] { send(CommandKind::Checkpoint, tr("checkpoint")); });
    live_actions_ << menu->addAction(tr("Record &kernels of the next steps..."), this, [this] {
        bool ok = false;
        const int steps = QInputDialog::getInt(window_, tr("Record kernels"),
                                               tr("Keep every kernel's record of the next steps:"), 20, 1, 100000, 1, &ok);
        if (ok) recordKernels(steps);
    });
    menu->addSeparator();
    stop_engine_ = menu->addAction(tr("&Kill launched engine"), this, [this] { engine_.stop(); });
    updateActions();
}

void RunControl::recordKernels(int steps) {
    fp8scope::live::Command c;
    c.kind = CommandKind::RecordKernels;
    c.value = steps;
    live_.send(c, tr("record the kernels of the next %1 steps").arg(steps));
}

void RunControl::updateActions() {
    for (QAction* a : live_actions_) a->setEnabled(live_.isAttached());
    emit liveChanged(live_.isAttached());
    if (stop_engine_) stop_engine_->setEnabled(engine_.running());
}

void RunControl::send(CommandKind kind, const QString& what) {
    fp8scope::live::Command c;
    c.kind = kind;
    live_.send(c, what);
}

void RunControl::switchRecipe() {
    auto [runs, recipes] = store_->read([](const TraceData& d) {
        QStringList r, t;
        for (const auto& run : d.meta.runs) r << QString::fromStdString(run.name);
        for (const auto& n : d.meta.training_recipes) t << QString::fromStdString(n);
        return std::pair(r, t);
    });
    SwitchRecipeDialog d(runs, recipes, window_);
    if (d.exec() != QDialog::Accepted) return;
    fp8scope::live::Command c;
    c.kind = CommandKind::SwitchRecipe;
    c.run = d.run();
    c.recipe = d.recipe().toStdString();
    live_.send(c, tr("switch to %1").arg(d.recipe()));
}
