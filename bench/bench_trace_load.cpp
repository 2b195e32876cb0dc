// The GUI's file loader on a trace (e.g. one left by `bench_trace_open --keep 1`): how long
// until every run has steps, scaling and operands in the series store (the views can draw
// all runs), how long until the whole file is in, the process's peak RSS against the
// file's size, and what the store holds by kind (bytes allocated, vectors' spare capacity
// included).
//
//   bench_trace_load TRACE.h5
#include <sys/resource.h>
#include <sys/stat.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <atomic>
#include <cstdio>

#include "models/trace_file_loader.h"

using namespace fp8scope::views;

namespace {

template <class V>
double mb(const V& v) {
    return static_cast<double>(v.capacity() * sizeof(typename V::value_type)) / 1e6;
}

// What the store holds, by kind, in MB.
void print_store(const TraceData& d) {
    double steps = 0, scaling = 0, operands = 0, blockmaps = 0, ops = 0;
    std::size_t captures = 0, present = 0;
    for (const RunData& r : d.runs) {
        const StepColumns& c = r.steps;
        steps += mb(c.step);
        for (const auto& column : c.columns()) steps += mb(column);
        scaling += mb(r.scaling.step) + mb(r.scaling.amax) + mb(r.scaling.scale);
        operands += mb(r.capture_steps) + mb(r.operands);
        for (const auto& at : r.operands) {
            operands += mb(at);
            for (const OperandSummary& o : at)
                if (!o.absent()) operands += static_cast<double>(o.bytes() - sizeof(o)) / 1e6, ++present;
        }
        captures += r.capture_steps.size();
        for (const auto& b : r.blockmaps) blockmaps += (sizeof(b) + (b.absmax.capacity() + b.scale_inv.capacity() + b.sqnr_db.capacity()) * sizeof(float)) / 1e6;
        ops += static_cast<double>(r.ops.bytes()) / 1e6;
    }
    std::printf("store: steps %.1f MB, scaling %.1f MB, operands %.1f MB (%zu at %zu capture steps: %.0f bytes each), "
                "block maps %.1f MB, ops %.1f MB\n",
                steps, scaling, operands, present, captures, present ? operands * 1e6 / static_cast<double>(present) : 0.0, blockmaps, ops);
}

}  // namespace

int main(int argc, char** argv) {
    QCoreApplication app(argc, argv);
    if (argc != 2) {
        std::fprintf(stderr, "usage: bench_trace_load TRACE.h5\n");
        return 2;
    }
    SeriesStore store;
    TraceFileLoader loader(&store);
    QElapsedTimer clock;
    std::atomic<qint64> every_run{-1};
    // Direct connection: called on the loader's worker after each batch.
    QObject::connect(&store, &SeriesStore::changed, [&] {
        if (every_run >= 0) return;
        const bool all = store.read([](const TraceData& d) {
            if (d.runs.empty()) return false;
            for (const RunData& r : d.runs)
                if (r.steps.size() == 0 || r.scaling.step.empty() || r.capture_steps.empty()) return false;
            return true;
        });
        if (all) every_run = clock.elapsed();
    });
    int status = 0;
    QObject::connect(&loader, &DataSource::finished, [&](const QString&, qint64 ms) {
        rusage ru{};
        getrusage(RUSAGE_SELF, &ru);
        struct stat st {};
        stat(argv[1], &st);
        const double rss = ru.ru_maxrss * 1024.0 / 1e6, file = static_cast<double>(st.st_size) / 1e6;
        std::printf("every run drawable after %lld ms; whole file in %lld ms; peak RSS %.1f MB (%.2f x the file's %.1f MB)\n",
                    static_cast<long long>(every_run.load()), static_cast<long long>(ms), rss, rss / file, file);
        store.read([](const TraceData& d) { print_store(d); return 0; });
        app.quit();
    });
    QObject::connect(&loader, &DataSource::failed, [&](const QString&, const QString& message) {
        std::fprintf(stderr, "%s\n", qPrintable(message));
        status = 1;
        app.quit();
    });
    clock.start();
    loader.open(QString::fromLocal8Bit(argv[1]));
    app.exec();
    return status;
}
