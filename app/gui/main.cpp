// fp8scope: the GUI. `fp8scope` launches a small lock-step comparison run on the CPU and
// shows it as it trains; `fp8scope trace.h5` opens a trace instead; `--no-launch` opens an
// empty window. `fp8scope --screenshot out.png [--open trace.h5] [--view NAME]` renders
// one view to PNG without a display and exits; `--run NAME --select "A, B"` choose the run
// and the operands it shows, `--blocks sqnr` what the block heatmaps show.
#include <QApplication>
#include <QCommandLineParser>

#include "main_window.h"
#include "run_control.h"
#include "screenshot.h"
#include "widgets/view_set.h"

namespace {

bool wants_screenshot(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)
        if (QByteArray(argv[i]).startsWith("--screenshot")) return true;
    return false;
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
    QCommandLineOption run_opt("run", "run for --screenshot (its name)", "NAME");
    QCommandLineOption select_opt("select",
                                  "operands for --screenshot, comma-separated labels (\"blocks.0.mlp.fc1 fprop x\" "
                                  "or \"L0 fc1 fprop x\"); the first is the current one", "LIST");
    QCommandLineOption blocks_opt("blocks", "block heatmaps for --screenshot: absmax, scale_inv or sqnr", "NAME");
    QCommandLineOption no_launch_opt("no-launch", "open an empty window instead of starting a run");
    cli.addOptions({open_opt, shot_opt, view_opt, run_opt, select_opt, blocks_opt, no_launch_opt});
    cli.process(app);
    QString trace = cli.value(open_opt);
    if (trace.isEmpty() && !cli.positionalArguments().isEmpty()) trace = cli.positionalArguments().first();

    MainWindow window;
    if (cli.isSet(shot_opt))
        return take_screenshot(window, {cli.value(shot_opt), trace, cli.value(view_opt), cli.value(run_opt),
                                        cli.value(select_opt), cli.value(blocks_opt)});
    window.show();
    if (!trace.isEmpty()) window.openTrace(trace);
    else if (!cli.isSet(no_launch_opt)) window.runControl()->launch(RunControl::defaultSpec());
    return app.exec();
}
