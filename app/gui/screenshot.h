// `fp8scope --screenshot`: renders the main window or one view of a trace to PNG without
// a display, with the run and operands chosen on the command line (README images).
#pragma once

#include <QStringList>

class MainWindow;

struct ScreenshotRequest {
    QString out;     // PNG path
    QStringList traces;  // trace files to open (several: a comparison); none: an empty window
    QString view;    // view name; empty: the whole window
    QString raise;   // whole window: the view whose dock is in front; empty: the default
    QString run;     // run name; empty: the first run
    QString select;  // comma-separated operand labels; the first one is the current operand
    QString blocks;  // block heatmaps' quantity: absmax, scale_inv or sqnr; empty: absmax
    QString step;    // the cursor's step; empty: the last step
    QString statistic;  // the error view's statistic (its box's text); empty: the selection's
};

// Waits for the load to end however long it takes, on the default dock layout. Exit
// status: 0 when written, 1 when the trace (no image is written) or the image failed, 2
// for a bad view, run, operand or quantity name.
int take_screenshot(MainWindow& window, const ScreenshotRequest& request);
