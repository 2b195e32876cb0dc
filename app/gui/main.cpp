// fp8scope: the GUI. `fp8scope` launches a small lock-step comparison run on the CPU and
// shows it as it trains; `fp8scope trace.h5` opens a trace instead, `fp8scope a.h5 b.h5`
// both as one comparison; `--no-launch` opens an empty window. `fp8scope --screenshot out.png [--open trace.h5] [--view NAME]` renders
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
    cli.addPositionalArgument("traces", "trace files to open; several are overlaid as a comparison", "[trace.h5...]");
    QCommandLineOption open_opt("open", "trace file to open (repeat it to compare traces)", "trace.h5");
    QCommandLineOption shot_opt("screenshot", "render to PNG and exit", "out.png");
    QCommandLineOption view_opt("view", "view for --screenshot: " + fp8scope::views::ViewSet::names().join(", "), "NAME");
    QCommandLineOption run_opt("run", "run for --screenshot (its name)", "NAME");
    QCommandLineOption select_opt("select",
                                  "operands for --screenshot, comma-separated labels (\"blocks.0.mlp.fc1 fprop x\" "
                                  "or \"L0 fc1 fprop x\"); the first is the current one", "LIST");
    QCommandLineOption blocks_opt("blocks", "block heatmaps for --screenshot: absmax, scale_inv or sqnr", "NAME");
    QCommandLineOption step_opt("step", "the cursor's step for --screenshot (default: the last)", "N");
    QCommandLineOption no_launch_opt("no-launch", "open an empty window instead of starting a run");
    cli.addOptions({open_opt, shot_opt, view_opt, run_opt, select_opt, blocks_opt, step_opt, no_launch_opt});
    cli.process(app);
    QStringList traces = cli.values(open_opt) + cli.positionalArguments();

    const bool screenshot = cli.isSet(shot_opt);
    MainWindow window(!screenshot);  // screenshots never depend on the user's saved layout
    if (screenshot)
        return take_screenshot(window, {cli.value(shot_opt), traces, cli.value(view_opt), cli.value(run_opt),
                                        cli.value(select_opt), cli.value(blocks_opt), cli.value(step_opt)});
    window.show();
    if (!traces.isEmpty()) window.openTraces(traces);
    else if (!cli.isSet(no_launch_opt)) window.runControl()->launch(RunControl::defaultSpec());
    return app.exec();
}
