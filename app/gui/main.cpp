// fp8scope: the GUI. `fp8scope` launches a small lock-step comparison run on the CPU and
// shows it as it trains; `fp8scope trace.h5` opens a trace instead, `fp8scope a.h5 b.h5`
// both as one comparison; `--attach ENDPOINT` follows a running engine; `--no-launch` opens an empty window. `fp8scope --screenshot out.png [--open trace.h5] [--view NAME]` renders
// one view to PNG without a display and exits; `--run NAME --select "A, B"` choose the run
// and the operands it shows, `--blocks sqnr` what the block heatmaps show.
#include <QApplication>
#include <cstdio>

#include "command_line.h"
#include "main_window.h"
#include "run_control.h"
#include "screenshot.h"
#include "widgets/view_set.h"

int main(int argc, char** argv) {
    QStringList args;
    for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
    // Parsed before QApplication exists: without a display it would abort on --help.
    const GuiOptions o = parse_command_line(args, fp8scope::views::ViewSet::names());
    if (o.help || !o.ok) {
        std::fputs(qPrintable(o.text), o.ok ? stdout : stderr);
        return o.ok ? 0 : 2;
    }
    if (!o.needsDisplay() && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
        qputenv("QT_QPA_PLATFORM", "offscreen");  // no display needed
    QApplication app(argc, argv);
    QApplication::setOrganizationName("fp8scope");
    QApplication::setApplicationName("fp8scope");

    const bool screenshot = !o.screenshot.isEmpty();
    MainWindow window(!screenshot);  // screenshots never depend on the user's saved layout
    if (o.large_rows > 0) window.setLargeStepRows(o.large_rows);
    if (screenshot)
        return take_screenshot(window, {o.screenshot, o.traces, o.view, o.raise, o.run, o.select, o.blocks, o.step, o.statistic});
    window.showAtStart();
    if (!o.attach.isEmpty()) window.runControl()->attach(o.attach, o.token);
    else if (!o.traces.isEmpty()) window.openTraces(o.traces);
    else if (!o.no_launch) window.runControl()->launch(RunControl::defaultSpec());
    return app.exec();
}
