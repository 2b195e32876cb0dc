// Main window: docks, menus, recent files, drag and drop, persisted layout.
#include "main_window.h"

#include <QApplication>
#include <QCloseEvent>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSettings>
#include <QStatusBar>

#include "cursor_bar.h"
#include "export_actions.h"
#include "models/trace_file_loader.h"
#include "run_control.h"

using namespace fp8scope::views;

namespace {
constexpr int kRecentFiles = 10;
}

MainWindow::MainWindow() {
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

    start_page_ = new QLabel(this);
    start_page_->setAlignment(Qt::AlignCenter);
    start_page_->setWordWrap(true);
    start_page_->setText(tr("<h2>fp8scope</h2><p>Open a saved trace with <b>File &gt; Open</b>, drop a trace file "
                            "here, or pass it on the command line: <code>fp8scope run.h5</code>.</p>"
                            "<p>Start a training run with <b>Run &gt; Launch run</b>, or attach to a running "
                            "engine with <b>Run &gt; Attach to engine</b>.</p>"));
    setCentralWidget(start_page_);

    bar_ = new CursorBar(&store_, &cursor_, &selection_, this);
    addToolBar(Qt::TopToolBarArea, bar_);
    views_->scheduler()->addClient([this] {
        bar_->refresh();
        const bool empty = store_.read([](const TraceData& d) { return d.meta.runs.empty(); });
        start_page_->setVisible(empty);
    });

    // Plots left and right, tables below; each dock can be moved, tabbed or closed.
    QDockWidget* previous[2] = {nullptr, nullptr};
    for (StoreView* v : views_->views()) {
        auto* dock = new QDockWidget(v->title(), this);
        dock->setObjectName("dock_" + v->name());
        dock->setWidget(v);
        const bool table = v->name() == "layers" || v->name() == "events" || v->name() == "kernels";
        const Qt::DockWidgetArea area = table ? Qt::BottomDockWidgetArea : Qt::RightDockWidgetArea;
        QDockWidget*& prev = previous[table ? 1 : 0];
        if (prev) tabifyDockWidget(prev, dock);
        else addDockWidget(area, dock);
        prev = dock;
    }
    if (auto* first = findChild<QDockWidget*>("dock_loss")) first->raise();
    if (auto* layers = findChild<QDockWidget*>("dock_layers")) layers->raise();

    connect(loader_.get(), &DataSource::opened, this, [this](const QString& path) {
        setWindowTitle(QStringLiteral("fp8scope - %1").arg(QFileInfo(path).fileName()));
        statusBar()->showMessage(tr("reading %1 ...").arg(path));
        rememberRecent(path);
    });
    connect(loader_.get(), &DataSource::finished, this, [this](const QString& path, qint64 ms) {
        statusBar()->showMessage(tr("%1 read in %2 ms").arg(path).arg(ms));
    });
    connect(loader_.get(), &DataSource::failed, this, [this](const QString&, const QString& msg) { showError(msg); });

    buildMenus();
    QSettings settings;
    restoreGeometry(settings.value("window/geometry").toByteArray());
    restoreState(settings.value("window/state").toByteArray());
    selection_.setStat(ErrorStat(settings.value("choices/stat", 0).toInt()));
    rebuildRecentMenu();
}

MainWindow::~MainWindow() {
    delete run_;  // stops the engine and the live client while the store still exists
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Open trace..."), QKeySequence::Open, this, [this] {
        const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), QString(),
                                                          tr("fp8scope traces (*.h5 *.hdf5);;All files (*)"));
        if (!path.isEmpty()) openTrace(path);
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
                    [this] { showError(export_timeline(this, store_, selection_.run())); });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);

    run_->fillMenu(menuBar()->addMenu(tr("&Run")));
    QMenu* view = menuBar()->addMenu(tr("&View"));
    for (QDockWidget* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
}

void MainWindow::openTrace(const QString& path) {
    if (!QFileInfo::exists(path)) {
        showError(tr("%1: no such file").arg(path));
        return;
    }
    run_->live()->close();  // the file replaces the live run in the store
    loader_->open(path);
    loader_->setFollowing(true);
}

bool MainWindow::waitUntilLoaded(int timeout_ms) {
    const bool done = loader_->wait(timeout_ms);
    QCoreApplication::processEvents();  // deliver the loader's queued signals
    views_->refreshNow();
    QCoreApplication::processEvents();
    return done;
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

void MainWindow::rememberRecent(const QString& path) {
    QSettings settings;
    QStringList recent = settings.value("recent").toStringList();
    recent.removeAll(path);
    recent.prepend(path);
    settings.setValue("recent", recent.mid(0, kRecentFiles));
    rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
    recent_menu_->clear();
    for (const QString& path : QSettings().value("recent").toStringList())
        recent_menu_->addAction(path, this, [this, path] { openTrace(path); });
    recent_menu_->setEnabled(!recent_menu_->isEmpty());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    QSettings settings;
    settings.setValue("window/geometry", saveGeometry());
    settings.setValue("window/state", saveState());
    settings.setValue("choices/stat", static_cast<int>(selection_.stat()));
    e->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    const auto urls = e->mimeData()->urls();
    if (!urls.isEmpty() && urls.first().isLocalFile()) openTrace(urls.first().toLocalFile());
}
