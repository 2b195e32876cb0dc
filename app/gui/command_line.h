// The GUI's command line, read before any window system is touched: `--help`, a bad
// option and `--screenshot` must work without a display.
#pragma once

#include <QStringList>

struct GuiOptions {
    QStringList traces;  // --open values, then the positional ones
    QString screenshot, view, raise, run, select, blocks, step, statistic;
    QString attach, token;  // a running engine's endpoint (--listen) and its token
    // --large-trace-rows: a trace with at least this many step records opens as an overview
    // (OpenTrace::kLargeStepRows unless set; 0: unset).
    unsigned long long large_rows = 0;
    bool no_launch = false;
    bool help = false;   // print `text` and exit 0
    QString text;        // the help text, or the error for a bad command line
    bool ok = true;      // false: print `text` and exit 2
    // Whether the run needs a display: not for --help, errors or --screenshot.
    bool needsDisplay() const { return ok && !help && screenshot.isEmpty(); }
};

// `args` as main() gets them, the program name first.
GuiOptions parse_command_line(const QStringList& args, const QStringList& view_names);
