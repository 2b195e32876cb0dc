// Shared plot look.
#include "widgets/plot_style.h"

#include <algorithm>
#include <cmath>

namespace fp8scope::views {

namespace {
// Dark grey (the baseline) and Tableau's nine hues, then ten more picked to stay at least
// 60 apart (RGB distance) from all others; Tableau's own light shades of blue, purple and
// cyan are too close to each other.
constexpr QRgb kPalette[kPaletteSize] = {
    0x333333, 0x1f77b4, 0xd62728, 0x2ca02c, 0xff7f0e, 0x9467bd, 0x8c564b, 0xe377c2, 0x17becf, 0xbcbd22,
    0xaec7e8, 0xff9896, 0x98df8a, 0xe7ba52, 0x000080, 0x800000, 0x008080, 0x808000, 0x4b0082, 0x7f7f7f};
// One hue per quantizer family (current, block1x128, block128x128, mxfp8, delayed in a
// trace's order), chosen so that the dark and light shades of two families never meet
// (with Tableau's order the orange, brown and red shades did): blue, orange, green,
// purple, olive, then crimson, teal, magenta.
constexpr QRgb kRecipeFamilyHues[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0x9467bd, 0xbcbd22, 0xd62728, 0x17becf, 0xe377c2};
constexpr int kRecipeFamilies = sizeof(kRecipeFamilyHues) / sizeof(kRecipeFamilyHues[0]);
}  // namespace

QColor series_color(int index) {
    return QColor(kPalette[((index % kPaletteSize) + kPaletteSize) % kPaletteSize]);
}

QVector<QColor> recipe_colors(const std::vector<std::string>& names) {
    std::vector<std::string> families;
    std::vector<int> family(names.size()), variant(names.size()), size;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const std::string f = names[i].substr(0, names[i].find_first_of("_:"));
        const auto it = std::find(families.begin(), families.end(), f);
        family[i] = static_cast<int>(it - families.begin());
        if (it == families.end()) { families.push_back(f); size.push_back(0); }
        variant[i] = size[family[i]]++;
    }
    QVector<QColor> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const QColor hue(kRecipeFamilyHues[family[i] % kRecipeFamilies]);
        const int n = size[family[i]];
        if (n == 1) { out << hue; continue; }
        // Variants from dark to light; darker than 0.3 all hues turn brown-black alike,
        // lighter than 0.7 they fade on white. A family of more than three (NVFP4 with its
        // rht and sr options) needs the steps of 0.22 to 0.78 to keep its shades apart.
        const double lo = n > 3 ? 0.22 : 0.30, hi = n > 3 ? 0.78 : 0.70;
        const double lightness = lo + (hi - lo) * variant[i] / (n - 1);
        out << QColor::fromHslF(hue.hslHueF(), hue.hslSaturationF(), lightness);
    }
    return out;
}

namespace {
// Stops sampled from matplotlib's colour maps.
template <class Stops>
QCPColorGradient gradient_of(const Stops& stops) {
    QCPColorGradient g;
    g.clearColorStops();
    const int n = static_cast<int>(std::size(stops));
    int i = 0;
    for (QRgb c : stops) g.setColorStopAt(double(i++) / (n - 1), QColor(c));
    g.setNanHandling(QCPColorGradient::nhTransparent);
    return g;
}
}  // namespace

QCPColorGradient viridis_gradient() {
    return gradient_of(std::initializer_list<QRgb>{0x440154, 0x482878, 0x3e4989, 0x31688e, 0x26828e, 0x1f9e89, 0x35b779, 0x6ece58, 0xb5de2b, 0xfde725});
}

QCPColorGradient magma_gradient() {
    return gradient_of(std::initializer_list<QRgb>{0x000004, 0x180f3d, 0x440f76, 0x721f81, 0x9e2f7f, 0xcd4071, 0xf1605d, 0xfd9668, 0xfeca8d, 0xfcfdbf});
}

QCPColorGradient cividis_gradient() {
    return gradient_of(std::initializer_list<QRgb>{0x00224e, 0x123570, 0x3b496c, 0x575d6d, 0x707173, 0x8a8678, 0xa59c74, 0xc3b369, 0xe1cc55, 0xfee838});
}

QCPColorGradient goodness_gradient(Better better) {
    if (better == Better::Neither) return viridis_gradient();
    // Low values first: worst first when higher is better, best first when lower is.
    const QCPColorGradient g = gradient_of(kGoodnessStops);
    return better == Better::Higher ? g : g.inverted();
}

void fill_cells(QCPColorMap* map, int cols, int rows, const std::function<double(int c, int r)>& value) {
    fill_grid(map, QCPRange(0, cols - 1), cols, QCPRange(0, rows - 1), rows, value);
}

void fill_grid(QCPColorMap* map, const QCPRange& keys, int cols, const QCPRange& values, int rows,
               const std::function<double(int c, int r)>& value, double lone) {
    auto extent = [lone](const QCPRange& r, int n) {
        return n > 1 ? r : QCPRange(r.center() - lone / 4, r.center() + lone / 4);
    };
    const int nc = std::max(2, cols), nr = std::max(2, rows);
    map->data()->setSize(nc, nr);
    map->data()->setRange(extent(keys, cols), extent(values, rows));
    for (int r = 0; r < nr; ++r)
        for (int c = 0; c < nc; ++c)
            map->data()->setCell(c, r, cols > 0 && rows > 0 ? value(std::min(c, cols - 1), std::min(r, rows - 1)) : qQNaN());
}

bool finite_range(QCPColorMap* map, QCPRange* range) {
    double lo = INFINITY, hi = -INFINITY;
    QCPColorMapData* d = map->data();  // cell() is not const
    for (int r = 0; r < d->valueSize(); ++r)
        for (int c = 0; c < d->keySize(); ++c)
            if (const double v = d->cell(c, r); std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
    if (lo > hi) return false;
    *range = lo < hi ? QCPRange(lo, hi) : QCPRange(lo - 1, hi + 1);
    return true;
}

QCustomPlot* make_plot(QWidget* parent, const QString& title) {
    auto* plot = new QCustomPlot(parent);
    plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    plot->setNoAntialiasingOnDrag(true);
    // Long, noisy series: draw polylines as segments, which Qt strokes far faster.
    plot->setPlottingHint(QCP::phFastPolylines, true);
    plot->setMinimumSize(200, 140);
    QFont f = plot->font();
    f.setPointSize(9);
    for (QCPAxis* a : plot->axisRect()->axes()) {
        a->setTickLabelFont(f);
        a->setLabelFont(f);
    }
    plot->legend->setFont(f);
    plot->legend->setBrush(QColor(255, 255, 255, 210));
    if (!title.isEmpty()) {
        plot->plotLayout()->insertRow(0);
        QFont tf = f;
        tf.setBold(true);
        plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, tf));
    }
    auto* placeholder = new QCPItemText(plot);
    placeholder->setObjectName("placeholder");
    placeholder->position->setType(QCPItemPosition::ptAxisRectRatio);
    placeholder->position->setCoords(0.5, 0.5);
    placeholder->setColor(Qt::gray);
    placeholder->setVisible(false);
    return plot;
}

namespace {
QCPTextElement* title_element(const QCustomPlot* plot) {
    QCPLayoutGrid* layout = plot->plotLayout();
    return layout->rowCount() > 0 && layout->columnCount() > 0 ? qobject_cast<QCPTextElement*>(layout->element(0, 0)) : nullptr;
}
}  // namespace

void set_title(QCustomPlot* plot, const QString& title) {
    if (QCPTextElement* t = title_element(plot)) t->setText(title);
}

QString plot_title(const QCustomPlot* plot) {
    const QCPTextElement* t = title_element(plot);
    return t ? t->text() : QString();
}

QCPLayer* cursor_layer(QCustomPlot* plot) {
    if (QCPLayer* l = plot->layer("cursor")) return l;
    plot->addLayer("cursor", plot->layer("main"), QCustomPlot::limAbove);
    QCPLayer* l = plot->layer("cursor");
    l->setMode(QCPLayer::lmBuffered);
    return l;
}

void replot_cursor_layer(QCustomPlot* plot) {
    cursor_layer(plot)->replot();
}

QCPItemStraightLine* add_cursor_line(QCustomPlot* plot, QCPAxisRect* rect) {
    rect = rect ? rect : plot->axisRect();
    auto* line = new QCPItemStraightLine(plot);
    line->setLayer(cursor_layer(plot));
    line->setClipAxisRect(rect);
    for (auto* p : {line->point1, line->point2}) p->setAxes(rect->axis(QCPAxis::atBottom), rect->axis(QCPAxis::atLeft));
    line->setPen(QPen(QColor(0xe0, 0x40, 0x40), 1, Qt::DashLine));
    line->setVisible(false);
    return line;
}

void set_cursor_line(QCPItemStraightLine* line, double step) {
    line->setVisible(step >= 0);
    line->point1->setCoords(step, 0);
    line->point2->setCoords(step, 1);
}

void set_log_axis(QCPAxis* axis) {
    axis->setScaleType(QCPAxis::stLogarithmic);
    axis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    axis->setNumberFormat("g");
    axis->setNumberPrecision(3);
}

namespace {
constexpr char kLegendColumns[] = "fp8scope_legend_columns";

// Re-flows a legend below its plot when the plot's width changes.
class LegendWrapper : public QObject {
public:
    using QObject::QObject;
    bool eventFilter(QObject* watched, QEvent* e) override {
        if (e->type() == QEvent::Resize) wrap_legend(static_cast<QCustomPlot*>(watched));
        return false;
    }
};
}  // namespace

void place_legend_below(QCustomPlot* plot, int max_columns) {
    QCPLayoutGrid* layout = plot->plotLayout();
    QCPLegend* legend = plot->legend;
    int row = 0;
    while (row < layout->rowCount() && layout->element(row, 0) != plot->axisRect()) ++row;
    plot->axisRect()->insetLayout()->take(legend);
    // Centred between two empty elements that take the spare width, so the entries stay
    // together instead of spreading over the plot's width.
    auto* band = new QCPLayoutGrid;
    layout->insertRow(row + 1);
    layout->addElement(row + 1, 0, band);
    layout->setRowStretchFactor(row + 1, 0.001);  // only the height its entries need
    band->addElement(0, 0, new QCPLayoutElement(plot));
    band->addElement(0, 1, legend);
    band->addElement(0, 2, new QCPLayoutElement(plot));
    band->setColumnStretchFactor(1, 0.001);
    legend->setBorderPen(Qt::NoPen);
    legend->setBrush(Qt::NoBrush);
    legend->setVisible(true);
    plot->setProperty(kLegendColumns, max_columns);
    plot->installEventFilter(new LegendWrapper(plot));
}

void wrap_legend(QCustomPlot* plot) {
    QCPLegend* legend = plot->legend;
    int n = 0, widest = 1;  // entries, not grid cells: a wrapped grid has empty cells
    for (int i = 0; i < legend->itemCount(); ++i)
        if (QCPAbstractLegendItem* item = legend->item(i)) {
            ++n;
            widest = std::max(widest, item->minimumOuterSizeHint().width() + legend->columnSpacing());
        }
    const int fit = (plot->width() - 20) / widest;
    const int columns = std::clamp(fit, 1, std::max(1, plot->property(kLegendColumns).toInt()));
    const int rows = std::max(1, (n + columns - 1) / columns);
    const int wrap = std::max(1, (n + rows - 1) / rows);
    legend->setWrap(wrap);
    legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
}

void fit_axes(QCustomPlot* plot) {
    plot->rescaleAxes();
    for (QCPAxisRect* rect : plot->axisRects())
        for (QCPAxis* a : rect->axes(QCPAxis::atLeft | QCPAxis::atRight)) {
            const QCPRange r = a->range();
            if (a->scaleType() == QCPAxis::stLogarithmic) a->setRange(r.lower / 1.1, r.upper * 1.1);
            else if (r.size() > 0) a->setRange(r.lower - 0.05 * r.size(), r.upper + 0.05 * r.size());
            else a->setRange(r.lower - 1, r.upper + 1);
        }
}

void set_label_ticks(QCPAxis* axis, const QStringList& labels) {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    for (int i = 0; i < labels.size(); ++i) ticker->addTick(i, labels[i]);
    axis->setTicker(ticker);
    axis->setRange(-0.5, labels.size() - 0.5);
}

void slant_tick_labels(QCPAxis* axis, const QStringList& labels, double degrees) {
    axis->setTickLabelRotation(degrees);
    const QFontMetrics metrics(axis->tickLabelFont());
    int widest = 0;
    for (const QString& l : labels) widest = std::max(widest, metrics.horizontalAdvance(l));
    QMargins m = axis->axisRect()->minimumMargins();
    m.setRight(degrees > 0 ? static_cast<int>(widest * std::cos(qDegreesToRadians(degrees))) : 0);
    axis->axisRect()->setMinimumMargins(m);
}

QVector<double> gaps_for_log(QVector<double> v) {
    for (double& x : v)
        if (!(x > 0) || !std::isfinite(x)) x = qQNaN();
    return v;
}

void set_placeholder(QCustomPlot* plot, const QString& text) {
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)); t && t->objectName() == "placeholder") {
            t->setText(text);
            t->setVisible(!text.isEmpty());
        }
}

}  // namespace fp8scope::views

namespace fp8scope::views {

namespace {
struct TimeUnit {
    double us;
    const char* name;
};
// The largest unit not larger than `us` (the smallest for anything under 1 ns).
TimeUnit time_unit_for(double us) {
    static constexpr TimeUnit units[] = {{1e6, "s"}, {1e3, "ms"}, {1.0, "us"}, {1e-3, "ns"}};
    for (const TimeUnit& u : units)
        if (std::abs(us) >= u.us) return u;
    return units[3];
}
QString in_unit(double us, const TimeUnit& u) {
    // Six digits: enough for any tick, and no float noise ("0.30000000000000004").
    return QStringLiteral("%1 %2").arg(QString::number(us / u.us, 'g', 6), QString::fromLatin1(u.name));
}

// Round linear steps (1, 2 or 5 x 10^k) giving at most `max_ticks` ticks in [lo, hi].
QVector<double> linear_ticks(double lo, double hi, int max_ticks) {
    const double raw = (hi - lo) / std::max(1, max_ticks), mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw / mag <= 1 ? mag : raw / mag <= 2 ? 2 * mag : raw / mag <= 5 ? 5 * mag : 10 * mag;
    QVector<double> out;
    for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi * (1 + 1e-12); t += step) out << (std::abs(t) < 1e-12 * step ? 0 : t);
    return out;
}

class LogTicker : public QCPAxisTicker {
public:
    LogTicker(int max_ticks, double us_per_coord) : us_per_coord_(us_per_coord) { setTickCount(max_ticks); }

protected:
    QVector<double> createTickVector(double, const QCPRange& range) override {
        return range.lower > 0 ? log_ticks(range.lower, range.upper, tickCount()) : QVector<double>();
    }
    QVector<double> createSubTickVector(int, const QVector<double>&) override { return {}; }
    QString getTickLabel(double tick, const QLocale&, QChar, int) override {
        return us_per_coord_ > 0 ? format_duration(tick * us_per_coord_) : QString::number(tick, 'g', 6);
    }

private:
    double us_per_coord_;
};

class TimeTicker : public QCPAxisTicker {
public:
    explicit TimeTicker(double us_per_coord) : us_per_coord_(us_per_coord) {}
    void generate(const QCPRange& range, const QLocale& locale, QChar format, int precision, QVector<double>& ticks,
                  QVector<double>* sub_ticks, QVector<QString>* labels) override {
        span_us_ = range.size() * us_per_coord_;
        QCPAxisTicker::generate(range, locale, format, precision, ticks, sub_ticks, labels);
    }

protected:
    QString getTickLabel(double tick, const QLocale&, QChar, int) override {
        return time_tick_label(tick * us_per_coord_, span_us_);
    }

private:
    double us_per_coord_, span_us_ = 0;
};
}  // namespace

QString format_duration(double us) { return in_unit(us, time_unit_for(us)); }

QString time_tick_label(double us, double span_us) { return in_unit(us, time_unit_for(span_us)); }

QVector<double> log_ticks(double lo, double hi, int max_ticks) {
    if (!(lo > 0) || !(hi > lo) || max_ticks < 1) return {};
    static const std::vector<std::vector<double>> mantissas = {{1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 5}, {1, 3}, {1}};
    const int first = static_cast<int>(std::floor(std::log10(lo))), last = static_cast<int>(std::ceil(std::log10(hi)));
    auto in_range = [&](double v) { return v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9); };
    QVector<double> out;
    for (const auto& m : mantissas) {
        out.clear();
        for (int e = first; e <= last; ++e)
            for (double k : m)
                if (const double v = k * std::pow(10.0, e); in_range(v)) out << v;
        if (out.size() <= max_ticks) break;
    }
    // Past one tick per decade: every n-th decade, n as small as fits.
    for (int every = 2; out.size() > max_ticks; ++every) {
        out.clear();
        for (int e = first; e <= last; ++e)
            if (const double v = std::pow(10.0, e); in_range(v) && e % every == 0) out << v;
    }
    if (out.size() < 2) return linear_ticks(lo, hi, max_ticks);  // inside one decade
    return out;
}

double round_down_log(double v) {
    const double mag = std::pow(10.0, std::floor(std::log10(v) + 1e-12));
    const double m = v / mag;
    return (m >= 5 - 1e-9 ? 5 : m >= 2 - 1e-9 ? 2 : 1) * mag;
}

void set_log_ticks(QCPAxis* axis, int max_ticks, double us_per_coord) {
    axis->setScaleType(QCPAxis::stLogarithmic);
    axis->setTicker(QSharedPointer<QCPAxisTicker>(new LogTicker(max_ticks, us_per_coord)));
}

void set_time_ticks(QCPAxis* axis, double us_per_coord) {
    axis->setTicker(QSharedPointer<QCPAxisTicker>(new TimeTicker(us_per_coord)));
}

bool spans_decades(const QVector<double>& values, double decades) {
    double lo = INFINITY, hi = 0;
    for (double v : values)
        if (v > 0 && std::isfinite(v)) { lo = std::min(lo, v); hi = std::max(hi, v); }
    return hi > 0 && std::log10(hi / lo) >= decades;
}

}  // namespace fp8scope::views
