// fp8scope: the GUI. `fp8scope` launches a small lock-step comparison run on the CPU and
// shows it as it trains; `fp8scope trace.h5` opens a trace instead; `--no-launch` opens an
// empty window. `fp8scope --screenshot out.png [--open trace.h5] [--view NAME]` renders
// one view to PNG without a display and exits.
#include <QApplication>
#include <QCommandLineParser>
#include <QDockWidget>
#include <cstdio>

#include "main_window.h"
#include "run_control.h"
#include "view_set.h"

namespace {

bool wants_screenshot(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (QByteArray(argv[i]).startsWith("--screenshot")) return true;
    return false;
}

int screenshot(MainWindow& window, const QString& out, const QString& view_name, const QString& trace) {
    window.resize(1400, 900);
    window.show();
    if (!trace.isEmpty()) {
        window.openTrace(trace);
        window.waitUntilLoaded(120000);
    }
    if (!window.lastError().isEmpty()) std::fprintf(stderr, "%s\n", qPrintable(window.lastError()));
    QWidget* target = &window;
    if (!view_name.isEmpty()) {
        fp8scope::views::StoreView* v = window.viewSet()->view(view_name);
        if (!v) {
            std::fprintf(stderr, "unknown view '%s'; views: %s\n", qPrintable(view_name),
                         qPrintable(fp8scope::views::ViewSet::names().join(", ")));
            return 2;
        }
        window.raiseView(view_name);
        v->resize(1200, 760);  // a view alone, at a readable size
        target = v;
    }
    window.waitUntilLoaded(0);
    if (!target->grab().save(out)) {
        std::fprintf(stderr, "%s: cannot write the image\n", qPrintable(out));
        return 1;
    }
    return window.lastError().isEmpty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    if (wants_screenshot(argc, argv) && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");  // no display needed
    QApplication app(argc, argv);
    QApplication::setOrganizationName("fp8scope");
    QApplication::setApplicationName("fp8scope");

    QCommandLineParser cli;
    cli.setApplicationDescription("Profiler and numerics inspector for FP8 training");
    cli.addHelpOption();
    cli.addPositionalArgument("trace", "trace file to open");
    QCommandLineOption open_opt("open", "trace file to open", "trace.h5");
    QCommandLineOption shot_opt("screenshot", "render to PNG and exit", "out.png");
    QCommandLineOption view_opt("view", "view for --screenshot: " + fp8scope::views::ViewSet::names().join(", "), "NAME");
    QCommandLineOption no_launch_opt("no-launch", "open an empty window instead of starting a run");
    cli.addOptions({open_opt, shot_opt, view_opt, no_launch_opt});
    cli.process(app);
    QString trace = cli.value(open_opt);
    if (trace.isEmpty() && !cli.positionalArguments().isEmpty()) trace = cli.positionalArguments().first();

    MainWindow window;
    if (cli.isSet(shot_opt)) return screenshot(window, cli.value(shot_opt), cli.value(view_opt), trace);
    window.show();
    if (!trace.isEmpty()) window.openTrace(trace);
    else if (!cli.isSet(no_launch_opt)) window.runControl()->launch(RunControl::defaultSpec());
    return app.exec();
}
