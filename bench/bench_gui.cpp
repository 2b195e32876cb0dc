// GUI responsiveness on a large trace: 100k steps x 204 operand slots (34 linears) of
// one run, operand records every 1000 steps. Prints the time to ingest the records into
// the series store (what opening a file costs after reading) and the time for one cursor
// move to redraw every view, all eight visible at once (offscreen).
#include <QApplication>
#include <QElapsedTimer>
#include <algorithm>
#include <cstdio>
#include <random>

#include "widgets/view_set.h"

using namespace fp8scope;
using namespace fp8scope::views;

namespace {

constexpr std::int64_t kSteps = 100000, kBatch = 20000, kCaptureEvery = 1000;
constexpr int kLinears = 34;

trace::TraceMeta meta() {
    trace::TraceMeta m;
    m.runs = {{"delayed", "delayed"}};
    for (int l = 0; l < kLinears; ++l) m.linears.push_back({"blocks." + std::to_string(l / 4) + ".l" + std::to_string(l % 4), l / 4, 512, 512});
    m.quantizers = {"current_e4m3", "block1x128", "block128x128", "mxfp8_e4m3"};
    m.ops = {"fprop", "dgrad", "wgrad", "quantize"};
    m.capture_every = kCaptureEvery;
    return m;
}

TraceBatch batch(std::int64_t from, std::int64_t to, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(0.5f, 2.0f);
    const int n_slots = kLinears * trace::kOperandsPerLinear;
    TraceBatch b;
    for (std::int64_t s = from; s < to; ++s) {
        b.steps.push_back({0, s, 5.0 - 1e-5 * s, s % 100 == 0 ? 5.0 : NAN, 1e-3, 1.0, 0.2, 5e4, 0});
        trace::ScalingRecord sc{0, s, std::vector<float>(n_slots), std::vector<float>(n_slots)};
        for (int i = 0; i < n_slots; ++i) { sc.amax[i] = u(rng); sc.scale[i] = 448.0f / u(rng); }
        b.scaling.push_back(std::move(sc));
        for (int k = 0; k < 4; ++k) b.ops.push_back({0, s, k, k, 0, -1, 0, s * 1000000 + k * 1000, s * 1000000 + k * 1000 + 900});
        if (s % kCaptureEvery == 0)
            for (int l = 0; l < kLinears; ++l)
                for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                    for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                        if (trace::operand_slot(l, g, o) < 0) continue;
                        trace::OperandRecord r;
                        r.key = {0, s, l, g, o};
                        r.quantizer_in_use = 0;
                        r.stats.amax = u(rng);
                        for (int e = -30; e < 2; ++e) r.stats.histogram.bins[e - kHistMinExp] = 1000 + e;
                        r.stats.outliers.channel_absmax.assign(512, 1.0f);
                        r.errors.resize(4);
                        r.amax_history.assign(1024, 1.0f);
                        b.operands.push_back(std::move(r));
                    }
    }
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    SeriesStore store;
    StepCursor cursor;
    Selection selection;
    std::mt19937 rng(7);

    const auto gen = store.reset(meta());
    double ingest_ms = 0;
    for (std::int64_t from = 0; from < kSteps; from += kBatch) {
        TraceBatch b = batch(from, std::min(kSteps, from + kBatch), rng);
        QElapsedTimer t;
        t.start();
        store.append(gen, std::move(b));
        ingest_ms += t.nsecsElapsed() * 1e-6;
    }
    std::printf("ingest: %lld steps x %d operand slots, 1 run: %.1f ms\n", static_cast<long long>(kSteps),
                kLinears * trace::kOperandsPerLinear, ingest_ms);

    ViewSet set(&store, &cursor, &selection);
    selection.setOperand({17, Gemm::Dgrad, Operand::DY});
    QElapsedTimer first;
    first.start();
    for (StoreView* v : set.views()) {
        v->resize(900, 600);
        v->show();  // a view draws when first shown
    }
    set.refreshNow();
    QCoreApplication::processEvents();  // the paint itself
    std::printf("first redraw of all 8 views (plot data built): %.1f ms\n", first.nsecsElapsed() * 1e-6);

    std::vector<double> ms;
    std::uniform_int_distribution<std::int64_t> pick(0, kSteps - 1);
    for (int i = 0; i < 50; ++i) {
        cursor.setStep(pick(rng));
        QElapsedTimer t;
        t.start();
        set.refreshNow();
        QCoreApplication::processEvents();
        ms.push_back(t.nsecsElapsed() * 1e-6);
    }
    for (StoreView* v : set.views()) {  // which view costs what
        std::vector<double> per;
        for (int i = 0; i < 20; ++i) {
            cursor.setStep(pick(rng));
            QElapsedTimer t;
            t.start();
            v->refresh();
            per.push_back(t.nsecsElapsed() * 1e-6);
        }
        std::sort(per.begin(), per.end());
        std::printf("  %-9s cursor move: median %.1f ms\n", qPrintable(v->name()), per[per.size() / 2]);
    }
    std::sort(ms.begin(), ms.end());
    double sum = 0;
    for (double x : ms) sum += x;
    std::printf("cursor move, all 8 views redrawn: mean %.1f ms, median %.1f ms, max %.1f ms (50 moves)\n",
                sum / ms.size(), ms[ms.size() / 2], ms.back());
    return 0;
}
