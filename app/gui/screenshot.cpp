// Screenshot mode.
#include "screenshot.h"

#include <QApplication>
#include <QPixmap>
#include <cstdio>

#include "main_window.h"
#include "models/display_names.h"
#include "widgets/blockmap_view.h"
#include "widgets/error_view.h"

using namespace fp8scope::views;

namespace {

// Applies --run and --select once the trace's names are known; false on a name that
// matches nothing (the message names it).
bool apply_choices(MainWindow& window, const ScreenshotRequest& r) {
    QStringList unknown;
    int run = -1;
    std::vector<OperandRef> refs;
    window.store().read([&](const TraceData& d) {
        for (int i = 0; i < static_cast<int>(d.meta.runs.size()); ++i)
            if (run_label(d.meta, i) == r.run || QString::fromStdString(d.runs[i].info.name) == r.run) run = i;
        refs = parse_operand_list(d.meta, r.select, &unknown);
    });
    if (!r.run.isEmpty() && run < 0) {
        std::fprintf(stderr, "no run named '%s' in the trace\n", qPrintable(r.run));
        return false;
    }
    if (!unknown.isEmpty()) {
        std::fprintf(stderr, "no operand named '%s' in the trace (e.g. 'blocks.0.mlp.fc1 fprop x' or 'L0 fc1 fprop x')\n",
                     qPrintable(unknown.join("', '")));
        return false;
    }
    if (run >= 0) window.selection()->setRun(run);
    if (!refs.empty()) window.selection()->setOperands(refs, refs.front());
    if (!r.blocks.isEmpty()) {
        const int q = BlockMapView::quantityByName(r.blocks);
        if (q < 0) {
            std::fprintf(stderr, "unknown block map quantity '%s'; absmax, scale_inv or sqnr\n", qPrintable(r.blocks));
            return false;
        }
        qobject_cast<BlockMapView*>(window.viewSet()->view("blocks"))->setQuantity(BlockMapView::Quantity(q));
    }
    if (!r.statistic.isEmpty() &&
        !qobject_cast<ErrorView*>(window.viewSet()->view("error"))->showStatistic(r.statistic)) {
        std::fprintf(stderr, "unknown error view statistic '%s'\n", qPrintable(r.statistic));
        return false;
    }
    if (!r.step.isEmpty()) {
        bool ok = false;
        const qlonglong step = r.step.toLongLong(&ok);
        const auto [first, last] =
            window.store().read([](const TraceData& d) { return std::pair(d.first_step, d.last_step); });
        if (!ok || step < first || step > last) {
            std::fprintf(stderr, "step '%s' is not in the trace (steps %lld to %lld)\n", qPrintable(r.step),
                         static_cast<long long>(first), static_cast<long long>(last));
            return false;
        }
        window.cursor()->setStep(step);
    }
    return true;
}

}  // namespace

int take_screenshot(MainWindow& window, const ScreenshotRequest& r) {
    window.resize(1200, 760);
    // Never focused, so that the picture does not depend on when the window system
    // activates it (a focused spin box draws its text selected).
    window.setAttribute(Qt::WA_ShowWithoutActivating);
    window.show();
    if (!r.traces.isEmpty()) {
        window.openTraces(r.traces);
        window.waitUntilLoaded(-1);  // a load always ends: finished or failed
        if (!window.lastError().isEmpty()) {
            std::fprintf(stderr, "%s\nno image written\n", qPrintable(window.lastError()));
            return 1;
        }
        if (!window.showsReport() && window.store().read([](const TraceData& d) { return d.empty(); })) {
            std::fprintf(stderr, "%s: the trace holds no steps yet; no image written\n", qPrintable(r.traces.join(", ")));
            return 1;
        }
    }
    if (!apply_choices(window, r)) return 2;
    QWidget* target = &window;
    if (!r.raise.isEmpty() && !window.raiseView(r.raise)) {
        std::fprintf(stderr, "unknown view '%s'; views: %s\n", qPrintable(r.raise), qPrintable(ViewSet::names().join(", ")));
        return 2;
    }
    if (!r.view.isEmpty()) {
        StoreView* v = window.viewSet()->view(r.view);
        if (!v) {
            std::fprintf(stderr, "unknown view '%s'; views: %s\n", qPrintable(r.view), qPrintable(ViewSet::names().join(", ")));
            return 2;
        }
        // Out of its dock, so that the docks' layout does not decide its size.
        v->setParent(nullptr);
        v->resize(1200, 760);
        v->show();
        target = v;
    }
    window.waitUntilLoaded(0);
    if (QWidget* focused = QApplication::focusWidget()) focused->clearFocus();
    const QPixmap image = target->grab();
    if (image.isNull() || !image.save(r.out, nullptr, 0)) {  // 0: the smallest PNG
        std::fprintf(stderr, "%s: cannot write the image\n", qPrintable(r.out));
        return 1;
    }
    return window.lastError().isEmpty() ? 0 : 1;
}
