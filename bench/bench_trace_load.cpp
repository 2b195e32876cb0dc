// The GUI's file loader on a trace (e.g. one left by `bench_trace_open --keep 1`): how long
// until every run has steps, scaling and operands in the series store (the views can draw
// all runs), how long until the whole file is in, and the process's peak RSS.
//
//   bench_trace_load TRACE.h5
#include <sys/resource.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <atomic>
#include <cstdio>

#include "models/trace_file_loader.h"

using namespace fp8scope::views;

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
        std::printf("every run drawable after %lld ms; whole file in %lld ms; peak RSS %.1f MB\n",
                    static_cast<long long>(every_run.load()), static_cast<long long>(ms), ru.ru_maxrss / 1024.0);
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
