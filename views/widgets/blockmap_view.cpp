// Block heatmaps. The plot's layout is rebuilt on each redraw: one axis rect per quantizer
// in a grid shaped so that the tiles come out as large as the plot allows, then a colour
// scale per format family, all over one value range.
#include "widgets/blockmap_view.h"

#include <QComboBox>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <vector>

#include "models/display_names.h"
#include "models/model_roles.h"
#include "widgets/plot_style.h"

namespace fp8scope::views {

namespace {
// What each map needs besides its tiles: tick labels and axis title left, title above,
// tick labels and axis title below.
constexpr int kMapMarginX = 45, kMapMarginY = 70;

// Columns of the grid of `n` maps of grid_rows x grid_cols tiles in a width x height plot
// that give each tile the most pixels (`tile_px`: that many).
int map_columns(int n, int grid_rows, int grid_cols, int width, int height, double* tile_px = nullptr) {
    int best = 1;
    double best_tile = 0;
    for (int c = 1; c <= n; ++c) {
        const int r = (n + c - 1) / c;
        const double tile = std::min((double(width) / c - kMapMarginX) / std::max(1, grid_cols),
                                     (double(height) / r - kMapMarginY) / std::max(1, grid_rows));
        if (tile > best_tile) { best_tile = tile; best = c; }
    }
    if (tile_px) *tile_px = best_tile;
    return best;
}

// Ticks on tiles that exist, at most about eight, and no closer than `min_px` pixels
// (`tile_px` a tile): square tiles widen one axis past the grid, and a tick at tile -2 or
// 6 of a 4-tile grid would only confuse.
void set_tile_ticks(QCPAxis* axis, int tiles, double tile_px, int min_px) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    int step = std::max(1, (tiles + 7) / 8);
    for (int nice : {1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256, 512, 1024})
        if (nice >= step && (nice * tile_px >= min_px || nice == 1024)) { step = nice; break; }
    for (int t = 0; t < tiles; t += step) ticker->addTick(t, QString::number(t));
    axis->setTicker(ticker);
}

// `name` broken after '_' into lines no wider than `width` pixels (a single part may be
// wider: it is not cut), so that a title never runs into its neighbours.
QString wrap_name(const QString& name, const QFontMetrics& fm, int width) {
    QStringList lines;
    QString line;
    const QStringList parts = name.split('_');
    for (int i = 0; i < parts.size(); ++i) {
        const QString part = parts[i] + (i + 1 < parts.size() ? "_" : "");
        if (!line.isEmpty() && fm.horizontalAdvance(line + part) > width) {
            lines << line;
            line.clear();
        }
        line += part;
    }
    lines << line;
    return lines.join('\n');
}
}  // namespace

BlockMapView::BlockMapView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "blocks", tr("Block heatmaps"), parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("show:"), this));
    quantity_ = new QComboBox(this);
    quantity_->addItems({tr("log10 |x| absmax per tile"), tr("log10 scale_inv"), tr("SQNR dB per tile"),
                         tr("log10 scale_inv minus per-tensor"), tr("SQNR dB minus per-tensor")});
    row->addWidget(quantity_);
    heading_ = new QLabel(this);
    row->addWidget(heading_, 1);
    layout->addLayout(row);
    plot_ = new QCustomPlot(this);
    plot_->setMinimumSize(300, 200);
    margins_ = new QCPMarginGroup(plot_);  // the maps' plotting areas line up across rows
    layout->addWidget(plot_, 1);
    connect(quantity_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

QString BlockMapView::heading() const { return heading_->text(); }

void BlockMapView::setQuantity(Quantity q) { quantity_->setCurrentIndex(q); }

int BlockMapView::quantityByName(const QString& name) {
    const QStringList names{"absmax", "scale_inv", "sqnr", "scale_inv_diff", "sqnr_diff"};
    return static_cast<int>(names.indexOf(name));
}

int BlockMapView::columnsFor(QSize plot, double* tile_px) const {
    return map_columns(shape_.maps, shape_.grid_rows, shape_.grid_cols, plot.width() - 80, plot.height(), tile_px);
}

void BlockMapView::resizeEvent(QResizeEvent* e) {
    StoreView::resizeEvent(e);
    if (maps_ > 0 && !one_tile_) refresh();  // the grid and the tiles' aspect follow the plot
}

namespace {
// E5M2 quantizers (per-tensor, MX) on one perceptual scale, E4M3 ones (MXFP8 E4M3 too) on
// another, the FP4 ones (E2M1: NVFP4, MXFP4) on a third: the element format of a map shows
// in its colours.
bool is_e5m2(const QString& quantizer) { return quantizer.contains("e5m2", Qt::CaseInsensitive); }
bool is_fp4(const QString& quantizer) { return quantizer.startsWith("nvfp4") || quantizer.startsWith("mxfp4"); }
enum Family { kE4M3, kE5M2, kE2M1 };
Family family_of(const QString& quantizer) { return is_fp4(quantizer) ? kE2M1 : is_e5m2(quantizer) ? kE5M2 : kE4M3; }

bool is_difference(BlockMapView::Quantity q) { return q == BlockMapView::ScaleInvDiff || q == BlockMapView::SqnrDiff; }

const std::vector<float>& quantity_of(const trace::BlockMapRecord& b, BlockMapView::Quantity q) {
    switch (q) {
        case BlockMapView::Absmax: return b.absmax;
        case BlockMapView::ScaleInv:
        case BlockMapView::ScaleInvDiff: return b.scale_inv;
        default: return b.sqnr_db;
    }
}

// log10 for |x| and scale_inv (they span decades), dB as they are.
double shown_value(double v, BlockMapView::Quantity q) {
    return q == BlockMapView::SqnrDb || q == BlockMapView::SqnrDiff ? v : v > 0 ? std::log10(v) : qQNaN();
}

// The per-tensor quantizer a block quantizer is compared with: current scaling of the same
// element format, with power-of-two scales when it has them too.
QString per_tensor_of(const QString& quantizer) {
    const QString base = is_e5m2(quantizer) ? "current_e5m2" : "current_e4m3";
    return quantizer.endsWith("_pow2") ? base + "_pow2" : base;
}
bool is_per_tensor(const QString& quantizer) { return quantizer.startsWith("current_"); }
}  // namespace

void BlockMapView::redraw() {
    const OperandRef sel = ctx().selection->operand();
    const int run = ctx().selection->run();
    const std::int64_t cursor = ctx().cursor->step();
    const auto quantity = static_cast<Quantity>(quantity_->currentIndex());
    plot_->clearPlottables();
    plot_->clearItems();
    plot_->plotLayout()->clear();
    maps_ = 0;
    one_tile_ = false;
    QString heading, missing = tr("no block maps of the selected operand at or before this step");
    ctx().store->read([&](const TraceData& d) {
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return;
        const RunData& rd = d.runs[run];
        const std::int64_t at = rd.blockmap_step_at(cursor, sel);
        if (at < 0) return;
        // Block maps are written every few captures: say so when the cursor is elsewhere.
        const QString when = at == cursor ? tr("step %1").arg(at)
                                          : tr("step %1, the newest block maps at or before the cursor (step %2)").arg(at).arg(cursor);
        heading = tr("%1 at %2").arg(operand_ref_label(d.meta, sel), when);
        std::vector<const trace::BlockMapRecord*> all, maps;
        for (const trace::BlockMapRecord* b : rd.blockmaps_of(at, sel)) {
            const std::size_t cells = static_cast<std::size_t>(b->grid_rows) * b->grid_cols;
            if (b->grid_rows > 0 && b->grid_cols > 0 && quantity_of(*b, quantity).size() >= cells) all.push_back(b);  // else damaged
        }
        // Differences: each block quantizer's map minus its per-tensor reference's.
        std::vector<const trace::BlockMapRecord*> reference;
        for (const trace::BlockMapRecord* b : all) {
            const QString name = quantizer_label(d.meta, b->quantizer);
            if (!is_difference(quantity)) { maps.push_back(b); continue; }
            if (is_per_tensor(name) || is_fp4(name)) continue;  // FP4 has no per-tensor twin
            const auto ref = std::find_if(all.begin(), all.end(), [&](const trace::BlockMapRecord* r) {
                return quantizer_label(d.meta, r->quantizer) == per_tensor_of(name) && r->grid_rows == b->grid_rows &&
                       r->grid_cols == b->grid_cols;
            });
            if (ref == all.end()) continue;
            maps.push_back(b);
            reference.push_back(*ref);
        }
        if (maps.empty()) {
            if (!all.empty()) missing = tr("no per-tensor block map to subtract at step %1").arg(at);
            return;
        }
        // |x| per tile is the tensor's, whatever the quantizer: one map says it all.
        if (quantity == Absmax) maps.erase(maps.begin() + 1, maps.end());
        // All quantizers of an operand share one tile grid (the first map's, for the shape).
        const trace::BlockMapRecord& g = *maps.front();
        heading = tr("%1 (%2x%3) at %4: %5x%6 tiles of %7x%8")
                      .arg(operand_ref_label(d.meta, sel)).arg(g.rows).arg(g.cols).arg(when)
                      .arg(g.grid_rows).arg(g.grid_cols).arg(g.tile_rows).arg(g.tile_cols);
        auto value_of = [&](std::size_t m, std::size_t cell) {
            const double v = shown_value(quantity_of(*maps[m], quantity)[cell], quantity);
            return is_difference(quantity) ? v - shown_value(quantity_of(*reference[m], quantity)[cell], quantity) : v;
        };
        if (g.grid_rows == 1 && g.grid_cols == 1) {
            // One square per quantizer would say nothing a line of text does not.
            one_tile_ = true;
            QStringList lines{tr("The tensor (%1x%2) is one tile at this block size (tiles of %3x%4): one value per quantizer.")
                                  .arg(g.rows).arg(g.cols).arg(g.tile_rows).arg(g.tile_cols)};
            for (std::size_t m = 0; m < maps.size(); ++m)
                lines << QStringLiteral("%1: %2").arg(quantity == Absmax ? tr("|x| absmax") : quantizer_label(d.meta, maps[m]->quantizer),
                                                      format_figure(is_difference(quantity) ? value_of(m, 0) : quantity_of(*maps[m], quantity)[0]));
            auto* text = new QCPTextElement(plot_, lines.join('\n'));
            text->setTextFlags(Qt::AlignLeft | Qt::AlignVCenter);
            plot_->plotLayout()->addElement(0, 0, text);
            maps_ = static_cast<int>(maps.size());
            return;
        }
        shape_ = {static_cast<int>(maps.size()), g.grid_rows, g.grid_cols};
        double tile_px = 0;
        const int columns = columnsFor(plot_->size(), &tile_px);
        const int rows = (shape_.maps + columns - 1) / columns;
        // The maps in a grid of their own, so that the scales beside it span all its rows.
        auto* grid = new QCPLayoutGrid;
        plot_->plotLayout()->addElement(0, 0, grid);
        auto* scales = new QCPLayoutGrid;
        plot_->plotLayout()->addElement(0, 1, scales);
        QCPColorScale* scale_of[3] = {nullptr, nullptr, nullptr};  // by Family (one diverging scale for differences)
        QCPRange range;
        bool any = false;
        QFont tf = font();
        tf.setPointSize(9);
        const QFontMetrics fm(tf);
        // Titles wrapped to the column and padded to one line count: every map of a row gets
        // the same height, so same-shape grids are drawn the same size.
        const int column_px = std::max(60, (plot_->width() - 80) / columns - 10);
        QStringList titles;
        int title_lines = 1;
        for (const trace::BlockMapRecord* b : maps) {
            const QString q = quantizer_label(d.meta, b->quantizer);
            const QString name = quantity == Absmax ? tr("|x| absmax (the same under every quantizer)")
                               : is_difference(quantity) ? tr("%1 - %2").arg(q, per_tensor_of(q)) : q;
            titles << wrap_name(name, fm, column_px);
            title_lines = std::max(title_lines, static_cast<int>(titles.back().count('\n')) + 1);
        }
        for (QString& t : titles) t += QString(title_lines - 1 - t.count('\n'), '\n');
        for (std::size_t m = 0; m < maps.size(); ++m) {
            const trace::BlockMapRecord* b = maps[m];
            // A title row over each map, not an axis label under it: it cannot run into the
            // tick labels of the row below.
            auto* cell = new QCPLayoutGrid;
            grid->addElement(maps_ / columns, maps_ % columns, cell);
            auto* title = new QCPTextElement(plot_, titles[static_cast<int>(m)], tf);
            cell->addElement(0, 0, title);
            auto* rect = new QCPAxisRect(plot_);
            cell->addElement(1, 0, rect);
            cell->setRowStretchFactor(0, 0.001);
            rect->setMarginGroup(QCP::msLeft | QCP::msRight | QCP::msTop | QCP::msBottom, margins_);
            QCPAxis *x = rect->axis(QCPAxis::atBottom), *y = rect->axis(QCPAxis::atLeft);
            y->setRangeReversed(true);  // row 0 at the top, like the matrix
            set_tile_ticks(y, b->grid_rows, tile_px, fm.height() + 4);
            set_tile_ticks(x, b->grid_cols, tile_px, fm.horizontalAdvance(QString::number(b->grid_cols)) + 8);
            for (QCPAxis* a : {x, y}) {
                a->setTickLabelFont(tf);
                a->setLabelFont(tf);
            }
            // Axis titles on the outer maps only; the margin group keeps every map the same size.
            if (maps_ % columns == 0) y->setLabel(tr("tile row"));
            if (maps_ / columns == rows - 1 || maps_ + columns >= shape_.maps) x->setLabel(tr("tile column"));
            auto* map = new QCPColorMap(x, y);
            map->setInterpolate(false);
            fill_cells(map, b->grid_cols, b->grid_rows, [&](int c, int r) {
                return value_of(m, static_cast<std::size_t>(r) * b->grid_cols + c);
            });
            if (QCPRange r; finite_range(map, &r)) {
                range = any ? QCPRange(std::min(range.lower, r.lower), std::max(range.upper, r.upper)) : r;
                any = true;
            }
            const int family = quantity != Absmax && !is_difference(quantity) ? family_of(quantizer_label(d.meta, b->quantizer)) : kE4M3;
            if (!scale_of[family]) {
                scale_of[family] = new QCPColorScale(plot_);
                scale_of[family]->setType(QCPAxis::atRight);
                // SQNR is a statistic with a good side, and so is a difference from per-tensor
                // (a finer scale_inv, a higher SQNR): the goodness scale of every view.
                scale_of[family]->setGradient(quantity == SqnrDb || quantity == SqnrDiff ? goodness_gradient(Better::Higher)
                                              : quantity == ScaleInvDiff               ? goodness_gradient(Better::Lower)
                                              : family == kE5M2                        ? magma_gradient()
                                              : family == kE2M1                        ? cividis_gradient()
                                                                                       : viridis_gradient());
                const QString format_name[3] = {tr(" (E4M3)"), tr(" (E5M2)"), tr(" (E2M1: NVFP4, MXFP4)")};
                scale_of[family]->axis()->setLabel(quantity_->currentText() + (quantity == Absmax || is_difference(quantity) ? QString()
                                                   : format_name[family]));
                scales->addElement(scales->elementCount(), 0, scale_of[family]);
            }
            map->setColorScale(scale_of[family]);  // the map takes the scale's gradient
            // Whole cells at the edges: the data range runs between the outer cells' centres.
            x->setRange(-0.5, b->grid_cols - 0.5);
            y->setRange(-0.5, b->grid_rows - 0.5);
            ++maps_;
        }
        // Differences: white at zero, the same reach either side.
        if (any && is_difference(quantity)) {
            const double reach = std::max({std::abs(range.lower), std::abs(range.upper), 1e-6});
            range = QCPRange(-reach, reach);
        }
        // One value range for all scales: the same colour position means the same value.
        if (any)
            for (QCPColorScale* sc : scale_of)
                if (sc) sc->setDataRange(range);
    });
    heading_->setText(maps_ ? heading : missing);
    plot_->replot();  // lays the axis rects out
    squareTiles();
    plot_->replot();
}

// Square tiles: the axis that would stretch them gets a wider range (white margins)
// instead, so an 8x1 grid is a column, not eight wide bands.
void BlockMapView::squareTiles() {
    for (QCPAxisRect* rect : plot_->axisRects()) {
        QCPAxis *x = rect->axis(QCPAxis::atBottom), *y = rect->axis(QCPAxis::atLeft);
        if (rect->width() <= 0 || rect->height() <= 0) continue;
        const double data_aspect = x->range().size() / y->range().size();
        const double rect_aspect = double(rect->width()) / rect->height();
        if (data_aspect < rect_aspect) x->setScaleRatio(y, 1.0);
        else y->setScaleRatio(x, 1.0);
    }
}

}  // namespace fp8scope::views
