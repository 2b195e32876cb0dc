// The data side of the GUI without widgets: series store ingest (incl. rewinds and stale
// generations), step cursor, coalescing redraws, and every table model under
// QAbstractItemModelTester, checked against the synthetic trace's formulas.
#include <ctime>
#include <QAbstractItemModelTester>
#include <QItemSelectionModel>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QSortFilterProxyModel>
#include <QTest>
#include <algorithm>
#include <thread>

#include "models/chrome_trace.h"
#include "models/display_names.h"
#include "models/events_model.h"
#include "models/kernel_stats_model.h"
#include "models/layers_model.h"
#include "models/model_roles.h"
#include "models/recipe_error_model.h"
#include "models/redraw_scheduler.h"
#include "models/selection.h"
#include "models/step_cursor.h"
#include "models/table_csv.h"
#include "synthetic_trace.h"

using namespace fp8scope;
using namespace fp8scope::views;
using fp8scope::testing::SyntheticSpec;

class ModelsTest : public QObject {
    Q_OBJECT
    SeriesStore store_;
    SyntheticSpec spec_;

    void load() {
        const auto gen = store_.reset(testing::synthetic_meta(spec_));
        QVERIFY(store_.append(gen, testing::synthetic_batch(spec_)));
    }

private slots:
    void init() { load(); }

    void storeHoldsEveryStep() {
        store_.read([&](const TraceData& d) {
            QCOMPARE(d.first_step, 0);
            QCOMPARE(d.last_step, spec_.steps - 1);
            QCOMPARE(static_cast<int>(d.runs.size()), spec_.runs);
            const RunData& r1 = d.runs[1];
            QCOMPARE(static_cast<std::int64_t>(r1.steps.size()), spec_.steps);
            QCOMPARE(r1.steps[&trace::StepRecord::loss][17], testing::loss_of(1, 17));
            QCOMPARE(r1.scaling.amax_at(33, 5), testing::amax_of(1, 33, 5));
            QCOMPARE(r1.capture_steps.size(), std::size_t(5));
            const auto* o = r1.operand_at(37, {2, Gemm::Dgrad, Operand::DY});
            QVERIFY(o);
            QCOMPARE(o->step, 30);
            QCOMPARE(o->figures[&OutlierSummary::kurtosis],
                     testing::kurtosis_of(trace::operand_slot(2, Gemm::Dgrad, Operand::DY), 30));
            QVERIFY(!r1.operand_at(37, {2, Gemm::Fprop, Operand::DY}));  // fprop has no dy
            auto [lo, hi] = r1.ops_of_step(12);
            QCOMPARE(hi - lo, std::size_t(spec_.ops_per_step));
            QCOMPARE(r1.blockmap_step_at(49, {0, Gemm::Fprop, Operand::X}), 25);
            QCOMPARE(r1.blockmaps_of(25, {0, Gemm::Fprop, Operand::X}).size(), testing::synthetic_recipes().size());
        });
    }

    void rewindDropsTheDiscardedSteps() {
        TraceBatch b;
        b.steps.push_back({0, 40, 9.0});
        trace::ScalingRecord sc{0, 40, std::vector<float>(24, 7.0f), std::vector<float>(24, 1.0f)};
        b.scaling.push_back(sc);
        QVERIFY(store_.append(store_.generation(), std::move(b)));
        store_.read([&](const TraceData& d) {
            const RunData& r = d.runs[0];
            QCOMPARE(r.steps.size(), std::size_t(41));  // steps 0..39 kept, 40 replaced
            QCOMPARE(r.steps[&trace::StepRecord::loss].back(), 9.0);
            QCOMPARE(r.scaling.step.size(), std::size_t(41));
            QCOMPARE(r.scaling.amax_at(40, 3), 7.0f);
            QCOMPARE(r.scaling.amax_at(39, 3), testing::amax_of(0, 39, 3));
        });
    }

    // The store's compact histogram gives every exponent the record's count.
    void summaryKeepsEveryHistogramCount() {
        struct Case {
            const char* name;
            std::vector<std::pair<int, std::int64_t>> bins;  // exponent, count
        };
        const std::int64_t big = std::int64_t(1) << 40;  // needs int64 counts
        const Case cases[] = {
            {"empty", {}},
            {"subnormal only", {{-149, 5}, {-140, 3}, {-127, 1}}},
            {"both ends", {{-149, 7}, {0, 2}, {127, 9}}},
            {"one bin", {{-3, 1}}},
            {"typical", {{-24, 10}, {-23, 0}, {-20, 300}, {-1, 4096}, {1, 12}}},
            {"int32 limits", {{-2, 2147483647}, {5, 1}}},
            {"wide", {{-149, big}, {-10, 3}, {127, big + 1}}},
        };
        for (const Case& c : cases) {
            trace::OperandRecord r;
            r.quantizer_in_use = 0;
            for (auto [e, n] : c.bins) r.stats.histogram.bins[e - kHistMinExp] = n;
            const OperandSummary s(r);
            const OperandSummary copy(s);
            for (const OperandSummary* got : {&s, &copy}) {
                const HistogramCounts h = got->histogram();
                for (int e = kHistMinExp - 2; e <= kHistMaxExp + 2; ++e) {
                    const std::int64_t want = e >= kHistMinExp && e <= kHistMaxExp ? r.stats.histogram.count(e) : 0;
                    if (h.count(e) != want) QFAIL(qPrintable(QStringLiteral("%1: exponent %2: %3, not %4").arg(c.name).arg(e).arg(h.count(e)).arg(want)));
                }
                bool any = false;
                for (auto [e, n] : c.bins) any = any || n != 0;
                QCOMPARE(h.empty(), !any);
                if (any) {
                    QCOMPARE(h.first(), c.bins.front().first);
                    QCOMPARE(h.last(), c.bins.back().first);
                }
            }
        }
        // int32 counts while they fit: half the bytes of the same range in int64.
        trace::OperandRecord narrow, wide;
        narrow.stats.histogram.bins[0] = wide.stats.histogram.bins[0] = 1;
        narrow.stats.histogram.bins[kHistBins - 1] = std::numeric_limits<std::int32_t>::max();
        wide.stats.histogram.bins[kHistBins - 1] = std::int64_t(std::numeric_limits<std::int32_t>::max()) + 1;
        QCOMPARE(OperandSummary(wide).bytes() - OperandSummary(narrow).bytes(), std::size_t(4 * kHistBins));
    }

    // Everything the views read of an operand survives the store's summary, its copies
    // and moves; the slot of a missing record is absent.
    void summaryKeepsWhatTheViewsShow() {
        QVERIFY(OperandSummary().absent());
        trace::OperandRecord r;
        r.key = {1, 40, 2, Gemm::Wgrad, Operand::DY};
        r.quantizer_in_use = 1;
        r.scale = 0.25;
        r.stats.amax = 3.5;
        r.stats.outliers.kurtosis = 11.0;
        r.stats.dynamic_range = 17.25;
        r.stats.histogram.bins[-4 - kHistMinExp] = 9;
        for (int i = 0; i < 3; ++i) {
            ErrorStats e;
            e.recipe = "recipe" + std::to_string(i);
            e.mse = 1.0 + i, e.sqnr_db = 30.0 + i, e.rel_l2 = 0.1 * i, e.max_abs_err = 2.0 * i;
            e.cosine = 1.0 - 0.01 * i, e.underflow_pct = 0.5 * i, e.overflow_pct = 0.25 * i;
            r.errors.push_back(e);
        }
        r.stats.outliers.channel_absmax = {1.0f, 8.0f, 0.5f, 2.0f, 3.0f};
        r.amax_history = {0.5f, 1.5f, 3.5f};
        const OperandSummary s(r);
        OperandSummary assigned;
        assigned = s;
        OperandSummary moved(OperandSummary{s});
        for (const OperandSummary* got : std::initializer_list<const OperandSummary*>{&s, &assigned, &moved}) {
            QVERIFY(!got->absent());
            QCOMPARE(got->step, 40);
            QCOMPARE(got->recipe_in_use, 1);
            QCOMPARE(got->figures[&trace::OperandRecord::scale], 0.25);
            QCOMPARE(got->figures[&TensorStats::amax], 3.5);
            QCOMPARE(got->figures[&OutlierSummary::kurtosis], 11.0);
            QCOMPARE(got->figures[&TensorStats::dynamic_range], 17.25);
            QCOMPARE(got->histogram().count(-4), 9);
            QCOMPARE(got->errors().size(), r.errors.size());
            for (std::size_t i = 0; i < r.errors.size(); ++i) {
                const ErrorFigures& e = got->errors()[i];
                const ErrorStats& want = r.errors[i];
                QCOMPARE(e[&ErrorStats::mse], want.mse);
                QCOMPARE(e[&ErrorStats::sqnr_db], want.sqnr_db);
                QCOMPARE(e[&ErrorStats::rel_l2], want.rel_l2);
                QCOMPARE(e[&ErrorStats::max_abs_err], want.max_abs_err);
                QCOMPARE(e[&ErrorStats::cosine], want.cosine);
                QCOMPARE(e[&ErrorStats::underflow_pct], want.underflow_pct);
                QCOMPARE(e[&ErrorStats::overflow_pct], want.overflow_pct);
            }
            QVERIFY(std::ranges::equal(got->channel_absmax(), r.stats.outliers.channel_absmax));
            QVERIFY(std::ranges::equal(got->amax_history(), r.amax_history));
        }
        OperandSummary from(s), to;
        to = std::move(from);
        QVERIFY(from.absent() && from.errors().empty() && from.histogram().empty() && from.channel_absmax().empty());
        QCOMPARE(to.channel_absmax().size(), r.stats.outliers.channel_absmax.size());
        trace::OperandRecord bare;  // no errors, channels or history: nothing allocated
        bare.quantizer_in_use = -1;
        const OperandSummary b(bare);
        QVERIFY(!b.absent());
        QVERIFY(b.errors().empty() && b.channel_absmax().empty() && b.amax_history().empty() && b.histogram().empty());
        QCOMPARE(b.bytes(), sizeof(OperandSummary));
    }

    // The store's packed op list gives back every field of every record.
    void opListKeepsEveryRecord() {
        std::vector<trace::OpRecord> want;
        const std::int64_t steps[] = {1, 1, 2, 4, 4, 4, 7};
        for (int i = 0; i < 7; ++i) {
            trace::OpRecord r{3, steps[i], 10 + i, i - 1, i / 2 - 1, i % 2 ? 0 : -1, i, 1000 * i, 1000 * i + 900 + i};
            r.kind = static_cast<trace::OpKind>(i % 4);
            r.parent = i % 3 - 1;
            r.operand = i % 4 - 1;
            r.bytes = i % 3 == 1 ? (std::int64_t(1) << 33) + i : 0;
            want.push_back(r);
        }
        OpList list;
        for (const auto& r : want) list.push_back(r);
        auto same = [](const trace::OpRecord& a, const trace::OpRecord& b) {
            return a.run == b.run && a.step == b.step && a.op == b.op && a.linear == b.linear && a.layer == b.layer &&
                   a.device == b.device && a.stream == b.stream && a.start_ns == b.start_ns && a.end_ns == b.end_ns &&
                   a.kind == b.kind && a.parent == b.parent && a.operand == b.operand && a.bytes == b.bytes;
        };
        QCOMPARE(list.size(), want.size());
        for (std::size_t i = 0; i < want.size(); ++i) {
            QVERIFY2(same(list[i], want[i]), qPrintable(QString::number(i)));
            QCOMPARE(list.step(i), want[i].step);
        }
        QVERIFY(same(list.back(), want.back()));
        using Range = std::pair<std::size_t, std::size_t>;
        QCOMPARE(list.of_step(1), Range(0, 2));
        QCOMPARE(list.of_step(2), Range(2, 3));
        QCOMPARE(list.of_step(4), Range(3, 6));
        QCOMPARE(list.of_step(7), Range(6, 7));
        QCOMPARE(list.of_step(0), Range(0, 0));  // before the first: where it would go
        QCOMPARE(list.of_step(3), Range(3, 3));
        QCOMPARE(list.of_step(9), Range(7, 7));
        // A rewind to step 2: its records and the later ones go, new ones follow.
        list.truncate(list.of_step(2).first);
        QCOMPARE(list.size(), std::size_t(2));
        QVERIFY(same(list.back(), want[1]));
        QCOMPARE(list.of_step(4), Range(2, 2));
        trace::OpRecord again = want[4];
        again.step = 2;
        list.push_back(again);
        QVERIFY(same(list[2], again));
        QCOMPARE(list.of_step(2), Range(2, 3));
    }

    void staleGenerationIsDropped() {
        const auto old = store_.generation();
        const auto gen = store_.reset(testing::synthetic_meta(spec_));
        QVERIFY(gen != old);
        QVERIFY(!store_.append(old, testing::synthetic_batch(spec_)));
        QVERIFY(store_.read([](const TraceData& d) { return d.empty(); }));
    }

    void producerThreadsAppendWhileUiReads() {
        const auto gen = store_.reset(testing::synthetic_meta(spec_));
        std::thread producer([&] {
            for (std::int64_t s = 0; s < 2000; ++s) {
                TraceBatch b;
                b.steps.push_back({0, s, testing::loss_of(0, s)});
                store_.append(gen, std::move(b));
            }
        });
        std::size_t seen = 0;
        while (seen < 2000) {
            seen = store_.read([](const TraceData& d) {
                const auto& c = d.runs[0].steps;
                for (std::size_t i = 0; i < c.size(); ++i)  // never a torn row
                    if (c[&trace::StepRecord::loss][i] != testing::loss_of(0, static_cast<std::int64_t>(c.step[i])))
                        return std::size_t(0);
                return c.size();
            });
        }
        producer.join();
        QCOMPARE(seen, std::size_t(2000));
    }

    void cursorFollowsPausesAndPlays() {
        StepCursor c;
        QSignalSpy moved(&c, &StepCursor::stepChanged);
        c.setRange(0, 10);
        QCOMPARE(c.step(), 10);  // follow starts at the newest step
        c.setRange(0, 20);
        QCOMPARE(c.step(), 20);
        c.setStep(5);
        QCOMPARE(c.mode(), StepCursor::Mode::Paused);
        c.setRange(0, 30);
        QCOMPARE(c.step(), 5);  // paused: stays
        c.setStep(99);
        QCOMPARE(c.step(), 30);  // clamped
        c.follow();
        c.setStep(25);
        c.play(2, 1);
        QTRY_COMPARE(c.step(), 30);
        QTRY_COMPARE(c.mode(), StepCursor::Mode::Paused);
        QVERIFY(moved.count() >= 6);
    }

    void redrawsCoalesce() {
        RedrawScheduler s(20);
        int refreshes = 0;
        s.addClient([&] { ++refreshes; });
        for (int i = 0; i < 100; ++i) s.markDirty();
        QTRY_COMPARE(refreshes, 1);
        QTest::qWait(50);
        QCOMPARE(refreshes, 1);
    }

    // A live run appends every few ms: data redraws keep to their pace and to a twentieth
    // of the time, while a cursor move is redrawn at once.
    void dataRedrawsKeepTheirPace() {
        using R = RedrawScheduler;
        QCOMPARE(R::delayFor(false, 0, 500, 20, 250), 20);     // the user's change: never held back
        QCOMPARE(R::delayFor(true, 1000, 0, 20, 250), 20);     // long idle: soon
        QCOMPARE(R::delayFor(true, 100, 5, 20, 250), 150);     // the data pace
        QCOMPARE(R::delayFor(true, 100, 100, 20, 250), 1800);  // a 100 ms refresh: 1900 ms apart
        QCOMPARE(R::delayFor(true, 0, 2000, 20, 250), R::kMaxDataGapMs);  // never stale for long
        RedrawScheduler s(10, 200);
        int refreshes = 0;
        s.addClient([&] {
            ++refreshes;
            // A costly redraw (40 ms of CPU): the next data one waits 760 ms.
            auto cpu_ms = [] {
                timespec t{};
                clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
                return t.tv_sec * 1000.0 + t.tv_nsec / 1e6;
            };
            const double start = cpu_ms();
            for (volatile int spin = 0; cpu_ms() - start < 40; spin = spin + 1) {}
        });
        QElapsedTimer clock;
        clock.start();
        while (clock.elapsed() < 1000) {
            s.markDataDirty();
            QTest::qWait(5);
        }
        QVERIFY2(refreshes >= 2 && refreshes <= 3, qPrintable(QString::number(refreshes)));
        const int before = refreshes;
        s.markDirty();
        QTRY_VERIFY_WITH_TIMEOUT(refreshes == before + 1, 100);
    }

    // Run 1 keeps linear 3 in high precision and gives linear 2's wgrad mxfp8: the
    // precision column names each row's GEMM recipe and marks the overridden ones.
    void layersModelShowsThePrecisionPlan() {
        trace::TraceMeta meta = testing::synthetic_meta(spec_);
        for (int run = 0; run < 2; ++run)
            for (int l = 0; l < spec_.linears; ++l)
                for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) {
                    trace::GemmPrecision p{run, l, g, run == 0 ? "baseline" : "delayed", "", "", 0};
                    if (run == 1) p.a = p.b = "delayed_e4m3";
                    if (run == 1 && l == 3) p = {run, l, g, "baseline", "", "", 1};
                    if (run == 1 && l == 2 && g == Gemm::Wgrad) p = {run, l, g, "mxfp8", "mxfp8_e4m3", "mxfp8_e4m3", 1};
                    meta.precision.push_back(p);
                }
        SeriesStore store;
        const auto gen = store.reset(meta);
        QVERIFY(store.append(gen, testing::synthetic_batch(spec_)));
        LayersModel m(&store);
        m.refresh(1, 37);
        auto text = [&](const OperandRef& ref) {
            return m.data(m.index(m.rowOf(ref), LayersModel::Precision), Qt::DisplayRole).toString();
        };
        auto shaded = [&](const OperandRef& ref) {
            return m.data(m.index(m.rowOf(ref), LayersModel::Precision), Qt::BackgroundRole).isValid();
        };
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) {
            const OperandRef ref{3, g, g == Gemm::Fprop ? Operand::X : Operand::DY};
            QCOMPARE(text(ref), QString("high precision (baseline) \u25c2 override"));
            QVERIFY(shaded(ref));
        }
        QCOMPARE(text({2, Gemm::Wgrad, Operand::X}), QString("mxfp8 \u25c2 override"));
        QCOMPARE(text({2, Gemm::Fprop, Operand::X}), QString("delayed"));
        QVERIFY(!shaded({2, Gemm::Fprop, Operand::X}));
        QCOMPARE(text({0, Gemm::Dgrad, Operand::W}), QString("delayed"));
        QCOMPARE(m.headerData(LayersModel::Precision, Qt::Horizontal, Qt::DisplayRole).toString(), QString("precision"));
        m.refresh(0, 37);
        QCOMPARE(text({3, Gemm::Fprop, Operand::X}), QString("high precision (baseline)"));
        // A trace without plans: blank.
        LayersModel plain(&store_);
        plain.refresh(1, 37);
        QCOMPARE(plain.data(plain.index(0, LayersModel::Precision), Qt::DisplayRole).toString(), QString());
    }

    void layersModel() {
        LayersModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37);
        QCOMPARE(m.rowCount(), spec_.linears * trace::kOperandsPerLinear);
        const OperandRef ref{3, Gemm::Wgrad, Operand::X};
        const int row = m.rowOf(ref);
        QVERIFY(row >= 0);
        QCOMPARE(m.operandAt(row), ref);
        const int slot = ref.slot();
        auto v = [&](int col) { return m.data(m.index(row, col), kValueRole).toDouble(); };
        QCOMPARE(v(LayersModel::Amax), double(testing::amax_of(1, 37, slot)));
        QCOMPARE(v(LayersModel::Scale), double(testing::scale_of(1, 37, slot)));
        QCOMPARE(v(LayersModel::Kurtosis), testing::kurtosis_of(slot, 30));
        QCOMPARE(v(LayersModel::CaptureStep), 30.0);
        QCOMPARE(v(LayersModel::SqnrDb), testing::sqnr_of(1, 30, slot, 1));  // run 1 uses recipe 1
        QCOMPARE(m.data(m.index(row, LayersModel::Recipe), Qt::DisplayRole).toString(), QString("block1x128"));
        QCOMPARE(m.data(m.index(row, LayersModel::Linear), Qt::DisplayRole).toString(), QString("blocks.1.mlp.fc1"));
        m.refresh(0, 12);  // baseline: unquantized, no error of the recipe in use
        QVERIFY(std::isnan(m.data(m.index(row, LayersModel::SqnrDb), kValueRole).toDouble()));
        m.refresh(7, 12);  // a run that does not exist: empty, no crash
        QCOMPARE(m.rowCount(), 0);

        m.refresh(1, 37);
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&m);
        proxy.setSortRole(kValueRole);
        proxy.sort(LayersModel::Amax, Qt::DescendingOrder);
        QCOMPARE(proxy.data(proxy.index(0, LayersModel::Amax), kValueRole).toDouble(),
                 double(testing::amax_of(1, 37, spec_.linears * 6 - 1)));
        proxy.setFilterKeyColumn(LayersModel::Linear);
        proxy.setFilterFixedString("fc1");
        QCOMPARE(proxy.rowCount(), spec_.linears / 2 * trace::kOperandsPerLinear);
    }

    // Several rows picked in the layers table (through a sorting proxy, as the view does)
    // name their operands, and a refresh while the run streams keeps them picked.
    void layersModelKeepsAMultiRowSelection() {
        LayersModel m(&store_);
        QSortFilterProxyModel proxy;
        proxy.setSourceModel(&m);
        proxy.setSortRole(kValueRole);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester proxy_tester(&proxy, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(1, 37);
        proxy.sort(LayersModel::Amax, Qt::DescendingOrder);
        QItemSelectionModel picked(&proxy);
        for (int row : {0, 2, 5}) picked.select(proxy.index(row, 0), QItemSelectionModel::Select | QItemSelectionModel::Rows);
        auto operands = [&] {
            std::vector<OperandRef> out;
            for (const QModelIndex& i : picked.selectedRows()) out.push_back(m.operandAt(proxy.mapToSource(i).row()));
            std::sort(out.begin(), out.end(), slot_order);
            return out;
        };
        // Sorted by amax, descending: the three largest slots of run 1 at step 37, whose
        // amax grows with the slot.
        const int n = spec_.linears * trace::kOperandsPerLinear;
        const std::vector<int> largest{n - 6, n - 3, n - 1};
        const std::vector<OperandRef> before = operands();
        QCOMPARE(int(before.size()), 3);
        for (int i = 0; i < 3; ++i) QCOMPARE(before[i].slot(), largest[i]);
        m.refresh(1, 45);
        QCOMPARE(operands(), before);
    }

    // Several operands picked at once, in slot order with the current one among them.
    void selectionHoldsSeveralOperands() {
        Selection s;
        QSignalSpy changed(&s, &Selection::changed);
        const OperandRef a{3, Gemm::Wgrad, Operand::X}, b{0, Gemm::Dgrad, Operand::DY}, c{1, Gemm::Fprop, Operand::W};
        s.setOperands({a, b, a}, c);
        QCOMPARE(changed.count(), 1);
        QCOMPARE(s.operand(), c);
        QCOMPARE(s.operands(), (std::vector<OperandRef>{b, c, a}));
        s.setOperands({c, a, b}, c);  // the same choice again
        QCOMPARE(changed.count(), 1);
        s.setOperands({c, a, b}, a);  // another current operand
        QCOMPARE(changed.count(), 2);
        QCOMPARE(s.operand(), a);
        s.setOperand(b);
        QCOMPARE(changed.count(), 3);
        QCOMPARE(s.operands(), std::vector<OperandRef>{b});
    }

    void operandLabelsParseBack() {
        const trace::TraceMeta meta = testing::synthetic_meta(spec_);
        const OperandRef ref{3, Gemm::Dgrad, Operand::DY};
        QCOMPARE(short_operand_label(meta, ref), QString("L1 fc1 dgrad dy"));
        QCOMPARE(operand_ref_label(meta, ref), QString("blocks.1.mlp.fc1 dgrad dy"));
        QStringList unknown;
        const auto refs = parse_operand_list(meta, " blocks.1.mlp.fc1 dgrad dy,l0 QKV fprop x,, L9 fc1 fprop x", &unknown);
        QCOMPARE(refs, (std::vector<OperandRef>{ref, {0, Gemm::Fprop, Operand::X}}));
        QCOMPARE(unknown, QStringList{"L9 fc1 fprop x"});
        // A tensor the Layers table lists once for two GEMMs ("dgrad+wgrad"): the first one's.
        unknown.clear();
        QCOMPARE(parse_operand_list(meta, "L1 fc1 dgrad+wgrad dy, blocks.0.attn.qkv fprop+wgrad x, L0 qkv fprop+nope x", &unknown),
                 (std::vector<OperandRef>{ref, {0, Gemm::Fprop, Operand::X}, {0, Gemm::Fprop, Operand::X}}));
        QVERIFY(parse_operand_list(meta, "L1 fc1 nope+other dy", nullptr).empty());
        // Every operand's labels, long and short, name it and no other.
        for (const OperandRef& r : all_operands(spec_.linears)) {
            QCOMPARE(parse_operand_list(meta, operand_ref_label(meta, r), nullptr), std::vector<OperandRef>{r});
            QCOMPARE(parse_operand_list(meta, short_operand_label(meta, r), nullptr), std::vector<OperandRef>{r});
        }
    }

    void eventsModel() {
        EventsModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh();
        QCOMPARE(m.rowCount(), 3);
        QCOMPARE(m.data(m.index(0, EventsModel::Step), kStepRole).toLongLong(), 5);  // step order
        QCOMPARE(m.data(m.index(0, EventsModel::Kind), Qt::DisplayRole).toString(), QString("non_finite"));
        QCOMPARE(m.data(m.index(1, EventsModel::Detail), Qt::DisplayRole).toString(), QString("delayed -> current"));
        QCOMPARE(m.data(m.index(2, EventsModel::Run), Qt::DisplayRole).toString(), QString("blockwise"));
    }

    void kernelStatsModel() {
        KernelStatsModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(2, 12);
        QCOMPARE(m.rowCount(), 6);
        // Sorted by total: op 5 (duration 6000 + 20 ns) first.
        QCOMPARE(m.data(m.index(0, KernelStatsModel::Name), Qt::DisplayRole).toString(), QString("layernorm"));
        QCOMPARE(m.data(m.index(0, KernelStatsModel::Calls), kValueRole).toDouble(), 1.0);
        QCOMPARE(m.data(m.index(0, KernelStatsModel::TotalMs), kValueRole).toDouble(), 6020 * 1e-6);
        QCOMPARE(m.data(m.index(0, KernelStatsModel::SharePct), kValueRole).toDouble(),
                 100.0 * 6020e-9 / testing::step_time_of(2, 12));
    }

    void recipeErrorModel() {
        RecipeErrorModel m(&store_);
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::QtTest);
        m.refresh(2, 45, Gemm::Fprop, Operand::W, ErrorStat::SqnrDb);
        QCOMPARE(m.rowCount(), spec_.linears);
        QCOMPARE(m.columnCount(), 1 + 4);
        for (int l = 0; l < spec_.linears; ++l)
            for (int r = 0; r < 4; ++r)
                QCOMPARE(m.value(l, r), testing::sqnr_of(2, 40, trace::operand_slot(l, Gemm::Fprop, Operand::W), r));
        m.refresh(2, 45, Gemm::Fprop, Operand::W, ErrorStat::UnderflowPct);
        QCOMPARE(m.value(1, 3), 1.5);
        QCOMPARE(m.headerData(2, Qt::Horizontal, Qt::DisplayRole).toString(), QString("block1x128"));
    }

    void csvExport() {
        EventsModel m(&store_);
        m.refresh();
        const QStringList lines = table_csv(m).split('\n', Qt::SkipEmptyParts);
        QCOMPARE(lines.size(), 4);
        QCOMPARE(lines[0], QString("step,run,event,detail"));
        QCOMPARE(lines[2], QString::fromUtf8("20,delayed \u2192 current @ step 20,recipe_switch,delayed -> current"));
        QString error;
        QVERIFY(!write_table_csv(m, "/nonexistent-dir/x.csv", &error));
        QVERIFY(error.contains("/nonexistent-dir/x.csv"));
    }

    void chromeTraceExport() {
        const QByteArray json = store_.read([](const TraceData& d) { return chrome_trace_json(d, 1, 3, 4); });
        QJsonArray events;  // the complete events; "M" events name the processes
        for (const auto& v : QJsonDocument::fromJson(json).object()["traceEvents"].toArray())
            if (v.toObject()["ph"].toString() == "X") events.append(v);
        QCOMPARE(events.size(), 2 * spec_.ops_per_step);
        const QJsonObject e = events[1].toObject();
        QCOMPARE(e["ph"].toString(), QString("X"));
        QCOMPARE(e["name"].toString(), QString("dgrad"));
        QCOMPARE(e["dur"].toDouble(), (2000 + 10) * 1e-3);
        QCOMPARE(e["ts"].toDouble(), (1000 + 10 + 100) * 1e-3);
        QCOMPARE(e["args"].toObject()["step"].toInt(), 3);
    }
};

QTEST_GUILESS_MAIN(ModelsTest)
#include "test_models.moc"
