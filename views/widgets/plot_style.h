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
// and MX.
QCPColorGradient viridis_gradient();
QCPColorGradient magma_gradient();
// The goodness scale (models/goodness.h) for a statistic, values and differences alike:
// red where the statistic is worse, blue where it is better, light in the middle (white
// at zero when the data range is symmetric). A statistic that is neither gets viridis.
QCPColorGradient goodness_gradient(Better better);
// Fills `map` with a grid of cols x rows cells, cell (c, r) centred on (c, r) and holding
// value(c, r). QCustomPlot sizes cells from the distance between cell centres, so a grid
// one cell wide or high is stored as two half-size cells of the same value.
void fill_cells(QCPColorMap* map, int cols, int rows, const std::function<double(int c, int r)>& value);
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
