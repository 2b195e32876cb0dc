// Command line parsing without a QCoreApplication.
#include "command_line.h"

#include <QCommandLineParser>
#include <QRegularExpression>

GuiOptions parse_command_line(const QStringList& args, const QStringList& view_names) {
    QCommandLineParser cli;
    cli.setApplicationDescription("Profiler and numerics inspector for FP8 training");
    const QCommandLineOption help_opt({"h", "help"}, "show this help and exit");
    cli.addOption(help_opt);
    cli.addPositionalArgument("traces", "trace files to open; several are overlaid as a comparison; a folder of a "
                                         "data-parallel job's rank traces (run.h5, run.rank1.h5, ...) opens as one job; "
                                         "a PyTorch capture folder is imported and followed", "[trace.h5...]");
    const QCommandLineOption open_opt("open", "trace file to open (repeat it to compare traces)", "trace.h5");
    const QCommandLineOption shot_opt("screenshot", "render to PNG and exit (no display needed)", "out.png");
    const QCommandLineOption view_opt("view", "the one view for --screenshot: " + view_names.join(", "), "NAME");
    const QCommandLineOption raise_opt("raise", "for --screenshot of the whole window: the view in front", "NAME");
    const QCommandLineOption run_opt("run", "run for --screenshot (its name)", "NAME");
    const QCommandLineOption select_opt(
        "select",
        "operands for --screenshot, comma-separated labels as the views write them (\"blocks.0.mlp.fc1 fprop x\", "
        "\"L0 fc1 fprop x\" or \"L0 qkv dgrad+wgrad dy\"); the first is the current one",
        "LIST");
    const QCommandLineOption blocks_opt("blocks", "block heatmaps for --screenshot: absmax, scale_inv, sqnr, "
                                        "scale_inv_diff or sqnr_diff", "NAME");
    const QCommandLineOption statistic_opt("statistic", "the error view's statistic for --screenshot, as its box "
                                           "names it (\"sqnr_db\", \"output SQNR\", \"output rel. error\")", "NAME");
    const QCommandLineOption step_opt("step", "the cursor's step for --screenshot (default: the last)", "N");
    const QCommandLineOption large_opt("large-trace-rows", "open a trace with at least N step records (all runs "
                                       "together) as a large one: its newest steps whole, the others decimated and read "
                                       "as the views need them (default 400000)", "N");
    const QCommandLineOption no_launch_opt("no-launch", "open an empty window instead of starting a run");
    const QCommandLineOption attach_opt("attach", "follow a running engine (its --listen endpoint: unix:PATH, "
                                        "tcp:PORT or HOST:PORT)", "ENDPOINT");
    const QCommandLineOption token_opt("token", "the engine's token for --attach", "T");
    cli.addOptions({open_opt, shot_opt, view_opt, raise_opt, run_opt, select_opt, blocks_opt, statistic_opt, step_opt, large_opt,
                    no_launch_opt, attach_opt, token_opt});
    GuiOptions o;
    if (!cli.parse(args)) {
        o.ok = false;
        o.text = cli.errorText() + "\n(fp8scope --help lists the options)\n";
        return o;
    }
    if (cli.isSet(help_opt)) {
        o.help = true;
        // helpText() names the program from QCoreApplication, which does not exist yet.
        o.text = cli.helpText().replace(QRegularExpression("^Usage: \\S*"), "Usage: fp8scope");
        return o;
    }
    o.traces = cli.values(open_opt) + cli.positionalArguments();
    o.screenshot = cli.value(shot_opt);
    o.view = cli.value(view_opt);
    o.raise = cli.value(raise_opt);
    o.run = cli.value(run_opt);
    o.select = cli.value(select_opt);
    o.blocks = cli.value(blocks_opt);
    o.step = cli.value(step_opt);
    o.statistic = cli.value(statistic_opt);
    if (cli.isSet(large_opt)) {
        bool ok = false;
        o.large_rows = cli.value(large_opt).toULongLong(&ok);
        if (!ok || o.large_rows == 0) {
            o.ok = false;
            o.text = QStringLiteral("--large-trace-rows: '%1' is not a number of step records above 0\n").arg(cli.value(large_opt));
            return o;
        }
    }
    o.no_launch = cli.isSet(no_launch_opt);
    o.attach = cli.value(attach_opt);
    o.token = cli.value(token_opt);
    return o;
}
