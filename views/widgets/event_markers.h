// Events (rewinds, recipe switches, NaNs, loss spikes, ...) marked on step plots: a thin
// vertical line at the event's step with its kind written at the top, under the curves so
// that it never hides them. Start, end, pause and resume are left out: every run has them.
#pragma once

#include "models/run_data.h"

class QCustomPlot;
class QCPAxisRect;

namespace fp8scope::views {

// Whether an event of kind `k` is worth a line on the plots.
bool marked_on_plots(EventKind k);
// Replaces the event markers of `rect` (default: the plot's first) by those of `run` and
// of the whole comparison (run -1); run -1 marks every run's events.
void mark_events(QCustomPlot* plot, const TraceData& d, int run, QCPAxisRect* rect = nullptr);
// The number of event lines on `plot` (for tests).
int event_marker_count(const QCustomPlot* plot);

}  // namespace fp8scope::views
