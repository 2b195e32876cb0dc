// One look for every plot: fonts, colours per run and quantizer, the step cursor line, mouse
// zoom and pan, and a title. Views build their QCustomPlots through these helpers.
#pragma once

#include <QColor>
#include <QVector>
#include <qcustomplot.h>
#include <functional>
#include <string>
#include <vector>

#include "models/goodness.h"

namespace fp8scope::views {

// Runs and operands: a qualitative palette of kPaletteSize distinct colours (dark grey
// first, for the baseline), repeating after that.
constexpr int kPaletteSize = 20;
QColor series_color(int index);
// One colour per analysis quantizer: a hue per family (current, delayed, block1x128, ...:
// the name up to its first '_' or ':'), shades of it for the family's variants.
QVector<QColor> recipe_colors(const std::vector<std::string>& names);
// Perceptual colour scales (lightness rises evenly, readable in grey) for figures that
// are neither good nor bad (amax, scales): viridis for the E4M3 family, magma for E5M2
// and MX, cividis for FP4 (E2M1).
QCPColorGradient viridis_gradient();
QCPColorGradient magma_gradient();
QCPColorGradient cividis_gradient();
// The goodness scale (models/goodness.h) for a statistic, values and differences alike:
// red where the statistic is worse, blue where it is better, light in the middle (white
// at zero when the data range is symmetric). A statistic that is neither gets viridis.
QCPColorGradient goodness_gradient(Better better);
// Fills `map` with a grid of cols x rows cells, cell (c, r) centred on (c, r) and holding
// value(c, r). QCustomPlot sizes cells from the distance between cell centres, so a grid
// one cell wide or high is stored as two half-size cells of the same value.
void fill_cells(QCPColorMap* map, int cols, int rows, const std::function<double(int c, int r)>& value);
// The same with the cell centres spread evenly over `keys` and `values`: a grid of one
// column (or row) is drawn `lone` wide, centred on the range (a single capture step or
// a single layer still shows).
void fill_grid(QCPColorMap* map, const QCPRange& keys, int cols, const QCPRange& values, int rows,
               const std::function<double(int c, int r)>& value, double lone = 1);
// The finite range of `map`'s cells; false when none is finite.
bool finite_range(QCPColorMap* map, QCPRange* range);
QCustomPlot* make_plot(QWidget* parent, const QString& title);
// Changes the title make_plot gave `plot` (nothing when it has none).
void set_title(QCustomPlot* plot, const QString& title);
QString plot_title(const QCustomPlot* plot);
// A vertical line at the cursor step in `rect` (default: the plot's first axis rect).
QCPItemStraightLine* add_cursor_line(QCustomPlot* plot, QCPAxisRect* rect = nullptr);
void set_cursor_line(QCPItemStraightLine* line, double step);
// The cursor line and whatever else follows the cursor live on their own buffered layer,
// so a cursor move repaints that layer alone, not 100k-point series.
QCPLayer* cursor_layer(QCustomPlot* plot);
void replot_cursor_layer(QCustomPlot* plot);
void set_log_axis(QCPAxis* axis);
// Moves the legend from inside the axis rect to its own row under it, so that it never
// covers data, and shows it. Its entries flow into balanced rows of at most `max_columns`
// that fit the plot's width, again whenever the plot is resized.
void place_legend_below(QCustomPlot* plot, int max_columns);
// Re-flows the legend's entries after entries were added or removed.
void wrap_legend(QCustomPlot* plot);
// Rescales every axis to the data and pads the value axes (of every axis rect) by 5% so that lines on the
// edge of the range stay visible.
void fit_axes(QCustomPlot* plot);
// Integer positions 0..n-1 labelled with `labels`, each cell centred on its tick.
void set_label_ticks(QCPAxis* axis, const QStringList& labels);
// Rotates the tick labels by `degrees` (0: level) and keeps room on the right for the
// last one: QCustomPlot drops a label that would cross the widget's edge.
void slant_tick_labels(QCPAxis* axis, const QStringList& labels, double degrees);
// Replaces NaN and non-positive values (for log axes) by QCustomPlot's gap marker.
QVector<double> gaps_for_log(QVector<double> v);
// Shows `text` in the middle of an empty plot (no data yet, nothing selected).
void set_placeholder(QCustomPlot* plot, const QString& text);

}  // namespace fp8scope::views

namespace fp8scope::views {

// Axis ticks and time units. A duration is written in the unit that gives it 1 to 3 digits
// before the point: "250 us", "2 ms", "1.5 s" (never "1e+06 us").
QString format_duration(double us);
// A tick label on a linear time axis spanning `span_us`: every tick in the one unit that
// fits the span ("20 ms" on an axis of 150 ms).
QString time_tick_label(double us, double span_us);
// Ticks for a log axis over [lo, hi] (lo > 0), at most `max_ticks`, spread evenly over the
// decades: every 1..9, else 1-2-5, 1-3 or 1 per decade, else every n-th decade; a range
// inside one decade gets round linear steps. The low end (a steady state under spikes) is
// labelled as well as the top.
QVector<double> log_ticks(double lo, double hi, int max_ticks);
// The largest 1, 2 or 5 x 10^k not above `v` (> 0): a log axis that starts there has a
// labelled tick at or under its lowest data (the steady state under spikes).
double round_down_log(double v);
// A log axis whose ticks are log_ticks(), labelled as numbers, or as durations when the
// axis coordinates are durations of `us_per_coord` microseconds each (0: plain numbers).
void set_log_ticks(QCPAxis* axis, int max_ticks, double us_per_coord = 0);
// A linear axis of durations, `us_per_coord` microseconds per coordinate, labelled in the
// unit that fits its range.
void set_time_ticks(QCPAxis* axis, double us_per_coord);
// Whether positive `values` span at least `decades` decades (a log axis reads them better).
bool spans_decades(const QVector<double>& values, double decades = 2);

}  // namespace fp8scope::views
