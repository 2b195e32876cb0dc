// Events (rewinds, recipe switches, NaNs, loss spikes, ...) marked on step plots: a thin
// vertical line at the event's step with its kind written at the top, under the curves so
// that it never hides them. Start, end, pause and resume are left out: every run has them.
// A label reads away from the nearer edge of the plot, so that it is never cut off, and
// is hidden while its step is outside the step axis' range.
#pragma once

#include <Qt>

#include "models/run_data.h"

class QCustomPlot;
class QCPAxisRect;

namespace fp8scope::views {

// Whether an event of kind `k` is worth a line on the plots.
bool marked_on_plots(EventKind k);
// Replaces the event markers of `rect` (default: the plot's first) by those of `run` and
// of the whole comparison (run -1); run -1 marks every run's events.
void mark_events(QCustomPlot* plot, const TraceData& d, int run, QCPAxisRect* rect = nullptr);
// Where the label of an event at `step` goes on a step axis showing `range`: to the right
// of its line (AlignLeft) in the left part of the plot, to the left (AlignRight) in the
// right part; 0 when the step is outside the range (no label).
Qt::Alignment event_label_side(double step, double lower, double upper);
// The number of event lines on `plot` (for tests).
int event_marker_count(const QCustomPlot* plot);

}  // namespace fp8scope::views
