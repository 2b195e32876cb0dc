// `fp8scope --screenshot`: renders the main window or one view of a trace to PNG without
// a display, with the run and operands chosen on the command line (README images).
#pragma once

#include <QString>

class MainWindow;

struct ScreenshotRequest {
    QString out;     // PNG path
    QString trace;   // trace file to open; empty: an empty window
    QString view;    // view name; empty: the whole window
    QString run;     // run name; empty: the first run
    QString select;  // comma-separated operand labels; the first one is the current operand
    QString blocks;  // block heatmaps' quantity: absmax, scale_inv or sqnr; empty: absmax
};

// Exit status: 0 when written, 1 when the trace or the image failed, 2 for a bad view,
// run, operand or quantity name.
int take_screenshot(MainWindow& window, const ScreenshotRequest& request);
