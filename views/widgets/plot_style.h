// One look for every plot: fonts, colours per run and recipe, the step cursor line, mouse
// zoom and pan, and a title. Views build their QCustomPlots through these helpers.
#pragma once

#include <QColor>
#include <QVector>
#include <qcustomplot.h>
#include <string>
#include <vector>

namespace fp8scope::views {

// Runs and operands: a qualitative palette of kPaletteSize distinct colours (dark grey
// first, for the baseline), repeating after that.
constexpr int kPaletteSize = 20;
QColor series_color(int index);
// One colour per analysis recipe: a hue per family (current, delayed, block1x128, ...:
// the name up to its first '_' or ':'), shades of it for the family's variants.
QVector<QColor> recipe_colors(const std::vector<std::string>& names);
QCustomPlot* make_plot(QWidget* parent, const QString& title);
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
// Rescales every axis to the data and pads the value axes by 5% so that lines on the
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
