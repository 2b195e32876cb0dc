// Main window: menus, recent files, drag and drop, load progress in the status bar.
#include "main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QScreen>
#include <QSettings>
#include <QStatusBar>

#include "analysis_report_reader.h"
#include "cursor_bar.h"
#include "dock_layout.h"
#include "export_actions.h"
#include "help_dialogs.h"
#include "models/rank_folder.h"
#include "models/recent_files.h"
#include "models/report_model.h"
#include "models/step_keys.h"
#include "models/trace_file_loader.h"
#include "run_control.h"
#include "widgets/findings_view.h"
#include "widgets/kernel_view.h"
#include "widgets/report_view.h"

using namespace fp8scope::views;

namespace {
const QString kTraceFilter =
    QObject::tr("fp8scope traces (*.h5 *.hdf5);;PyTorch capture folder (manifest.json);;All files (*)");
QString file_names(const QStringList& paths) {
    QStringList names;
    for (const QString& p : paths) names << QFileInfo(p).fileName();
    return names.join(" vs ");
}
}  // namespace

MainWindow::MainWindow(bool saved_layout) {
    setWindowTitle("fp8scope");
    setAcceptDrops(true);
    setDockOptions(AnimatedDocks | AllowTabbedDocks | AllowNestedDocks);
    views_ = std::make_unique<ViewSet>(&store_, &cursor_, &selection_);
    loader_ = std::make_unique<TraceFileLoader>(&store_);
    run_ = new RunControl(&store_, loader_.get(), this);
    connect(run_, &RunControl::message, this, [this](const QString& m) { statusBar()->showMessage(m); });
    connect(run_, &RunControl::error, this, &MainWindow::showError);
    connect(run_, &RunControl::sourceChanged, this,
            [this](const QString& title) { setWindowTitle(QStringLiteral("fp8scope - %1").arg(title)); });
    // A large trace's steps are read at full detail where a step plot (loss, amax) zooms in.
    for (StoreView* v : views_->views()) {
        connect(v, &StoreView::stepsShown, loader_.get(), &TraceFileLoader::showSteps);
        connect(v, &StoreView::kernelRecordsWanted, loader_.get(), &TraceFileLoader::showKernelRecords);
        connect(v, &StoreView::scalingWanted, loader_.get(), &TraceFileLoader::showScalingAt);
        connect(v, &StoreView::kernelSumsWanted, loader_.get(), &TraceFileLoader::showKernelSumsAt);
    }
    if (auto* kernels = qobject_cast<KernelView*>(views_->view(QStringLiteral("kernels")))) {
        connect(kernels, &KernelView::recordKernelsRequested, run_, &RunControl::recordKernels);
        connect(run_, &RunControl::liveChanged, kernels, &KernelView::setLiveControl);
    }

    start_page_ = new QLabel(this);
    start_page_->setAlignment(Qt::AlignCenter);
    start_page_->setWordWrap(true);
    start_page_->setText(tr("<h2>fp8scope</h2><p>Open a saved trace with <b>File &gt; Open</b>, drop a trace file "
                            "here, or pass it on the command line: <code>fp8scope run.h5</code>.</p>"
                            "<p>Start a training run with <b>Run &gt; Launch run</b>, or attach to a running "
                            "engine with <b>Run &gt; Attach to engine</b>.</p>"));
    setCentralWidget(start_page_);
    report_ = new ReportModel(this);
    report_view_ = new ReportView(report_, this);  // central only while a report is open

    bar_ = new CursorBar(&store_, &cursor_, &selection_, this);
    addToolBar(Qt::TopToolBarArea, bar_);
    docks_ = new DockLayout(this, views_->views());
    if (saved_layout) placed_ = docks_->restoreSaved();
    docks_->setEmpty(true);
    report_view_->hide();
    views_->scheduler()->addClient([this] {
        bar_->refresh();
        showPresentation();
    });
    keys_ = new StepKeys(&store_, &cursor_, &selection_, this);
    keys_->bind(this);

    // A new trace or run starts at its newest step, also when the cursor was paused on the
    // previous one.
    for (DataSource* s : {static_cast<DataSource*>(loader_.get()), static_cast<DataSource*>(run_->live())})
        connect(s, &DataSource::opened, &cursor_, &StepCursor::follow);
    connect(loader_.get(), &DataSource::opened, this, [this](const QString& path) {
        // A launched run's trace is opened by RunControl, not through openTraces().
        const QStringList opened = !opening_.isEmpty() && opening_.first() == path ? opening_ : QStringList{path};
        paths_ = opened;
        setWindowTitle(QStringLiteral("fp8scope - %1").arg(file_names(opened)));
        statusBar()->showMessage(tr("reading %1 ...").arg(path));
        for (const QString& p : opened) RecentFiles::add(p);
        rebuildRecentMenu();
    });
    connect(loader_.get(), &TraceFileLoader::progress, this, [this](const QString& path, int percent) {
        statusBar()->showMessage(tr("reading %1 ... %2%").arg(path).arg(percent));
    });
    connect(loader_.get(), &DataSource::finished, this, [this](const QString& path, qint64 ms) {
        loading_ = false;
        views_->findings()->setTracePath(path);
        statusBar()->showMessage(tr("%1 read in %2 ms").arg(path).arg(ms));
    });
    connect(loader_.get(), &DataSource::failed, this, [this](const QString&, const QString& msg) {
        loading_ = false;
        showError(msg);
    });

    connect(views_->findings(), &FindingsView::showView, this, &MainWindow::raiseView);
    buildMenus();
    selection_.setStat(ErrorStat(QSettings().value("choices/stat", 0).toInt()));
    rebuildRecentMenu();
}

void MainWindow::showAtStart() {
    if (placed_) return show();
    // The size to come back to from maximised: most of the screen, not the start page's hint.
    if (const QScreen* screen = QGuiApplication::primaryScreen())
        resize(screen->availableSize() * 0.85);
    showMaximized();
}

bool MainWindow::showsReport() const { return report_->isOpen(); }

void MainWindow::showPresentation() {
    const bool report = report_->isOpen();
    const bool empty = !report && store_.read([](const TraceData& d) { return d.meta.runs.empty(); });
    // One central widget at a time: a hidden page in the central area would still set the
    // window's least size.
    if (QWidget* central = report ? static_cast<QWidget*>(report_view_) : start_page_; centralWidget() != central) {
        QWidget* taken = takeCentralWidget();
        taken->setParent(this);  // kept, hidden, for the next switch
        taken->hide();
        setCentralWidget(central);
    }
    start_page_->setVisible(empty);
    report_view_->setVisible(report);
    bar_->setVisible(!report);  // a report has no steps to step through
    docks_->setEmpty(empty || report);
}

bool MainWindow::raiseView(const QString& name) { return docks_->raise(name); }

MainWindow::~MainWindow() {
    delete run_;  // stops the engine and the live client while the store still exists
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open trace..."), QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(), kTraceFilter);
        if (!path.isEmpty()) openTrace(path);
    });
    file->addAction(tr("Open &folder of rank traces..."), this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Open a data-parallel job's traces"));
        if (!dir.isEmpty()) openTraces({dir});
    });
    file->addAction(tr("Open as &comparison..."), this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open a trace to compare"), QString(), kTraceFilter);
        if (!path.isEmpty()) openComparison(path);
    });
    recent_menu_ = file->addMenu(tr("Open &recent"));
    file->addSeparator();
    file->addAction(tr("Export view as PNG/PDF..."), this, [this] {
        if (StoreView* v = currentView()) showError(export_view_image(this, *v));
    });
    file->addAction(tr("Export view table as CSV..."), this, [this] {
        if (StoreView* v = currentView()) showError(export_view_table(this, *v));
    });
    file->addAction(tr("Export timeline as Chrome/Perfetto JSON..."), this,
                    [this] {
                        // The operands whose counters the Kernels view shows go with the timeline.
                        const auto* kernels = qobject_cast<KernelView*>(views_->view(QStringLiteral("kernels")));
                        showError(export_timeline(this, store_, selection_.run(),
                                                  kernels ? kernels->counterOperands() : std::vector<OperandRef>{}));
                    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    run_->fillMenu(menuBar()->addMenu(tr("&Run")));
    docks_->fillMenu(menuBar()->addMenu(tr("&View")));
    QMenu* help = menuBar()->addMenu(tr("&Help"));
    help->addAction(tr("&Keyboard shortcuts"), QKeySequence::HelpContents, this, [this] { show_shortcuts(this); });
    help->addAction(tr("&About fp8scope"), this, [this] { show_about(this); });
}

void MainWindow::openTraces(const QStringList& paths) {
    for (const QString& p : paths)
        if (!QFileInfo::exists(p)) {
            showError(tr("%1: no such file").arg(p));
            return;
        }
    if (paths.size() == 1 && fp8scope::is_analysis_report(paths.first().toStdString())) return openReport(paths.first());
    if (paths.size() == 1 && !capture_folder(paths.first()).isEmpty()) {  // a PyTorch run's capture
        report_->clear();
        run_->importCapture(capture_folder(paths.first()));
        return;
    }
    // A folder: one data-parallel job's rank traces.
    const bool job = paths.size() == 1 && QFileInfo(paths.first()).isDir();
    const RankFolder folder = job ? rank_folder(paths.first()) : RankFolder{};
    if (!folder.error.isEmpty()) return showError(folder.error);
    report_->clear();
    run_->live()->close();  // the file replaces the live run in the store
    opening_.clear();
    for (const QString& p : job ? folder.paths : paths) opening_ << QFileInfo(p).absoluteFilePath();
    last_error_.clear();
    loading_ = true;
    if (job) loader_->openJob(opening_);
    else loader_->open(opening_);
    loader_->setFollowing(true);
}

void MainWindow::openReport(const QString& path) {
    last_error_.clear();
    QString error;
    if (!report_->open(path, &error)) return showError(error);
    run_->live()->close();  // the report replaces the trace or live run
    loader_->close();
    store_.clear();
    const QString absolute = QFileInfo(path).absoluteFilePath();
    paths_.clear();  // nothing to compare a report with
    setWindowTitle(QStringLiteral("fp8scope - %1").arg(QFileInfo(path).fileName()));
    statusBar()->showMessage(tr("%1: analysis report, %2 tensors").arg(absolute).arg(report_->report().tensors.size()));
    RecentFiles::add(absolute);
    rebuildRecentMenu();
    showPresentation();
}

void MainWindow::openComparison(const QString& path) {
    if (paths_.isEmpty()) return openTrace(path);
    openTraces(paths_ + QStringList{path});
}

void MainWindow::setLargeStepRows(std::uint64_t rows) { loader_->setLargeStepRows(rows); }

bool MainWindow::waitUntilLoaded(int timeout_ms) {
    QElapsedTimer clock;
    clock.start();
    // The loader's finished/failed arrive as queued signals: keep delivering them.
    while (loading_ && (timeout_ms < 0 || clock.elapsed() < timeout_ms)) {
        loader_->wait(50);
        QCoreApplication::processEvents();
    }
    views_->refreshNow();
    // A large trace's views ask for records as they draw (an early step's kernels, amax and
    // scale): drawn again once read.
    if (loader_->wait(timeout_ms < 0 ? 600000 : std::max(timeout_ms, 10000))) views_->refreshNow();
    views_->findings()->waitForFindings(timeout_ms < 0 ? 600000 : timeout_ms);
    QCoreApplication::processEvents();
    return !loading_;
}

StoreView* MainWindow::currentView() const {
    for (StoreView* v : views_->views())
        if (v->isVisible() && v->hasFocus()) return v;
    for (StoreView* v : views_->views())  // else the first visible plot
        if (v->isVisible()) return v;
    return nullptr;
}

void MainWindow::showError(const QString& message) {
    if (message.isEmpty()) return;
    last_error_ = message;
    statusBar()->showMessage(message);
    if (isVisible() && QApplication::platformName() != "offscreen") QMessageBox::warning(this, tr("fp8scope"), message);
}

void MainWindow::rebuildRecentMenu() {
    recent_menu_->clear();
    for (const QString& path : RecentFiles::list()) recent_menu_->addAction(path, this, [this, path] { openTrace(path); });
    recent_menu_->setEnabled(!recent_menu_->isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    docks_->save();
    QSettings().setValue("choices/stat", static_cast<int>(selection_.stat()));
    e->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    QStringList paths;
    for (const QUrl& u : e->mimeData()->urls())
        if (u.isLocalFile()) paths << u.toLocalFile();
    if (!paths.isEmpty()) openTraces(paths);
}
