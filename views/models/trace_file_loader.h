// Opens a saved trace off the UI thread: reads it on a worker (OpenTrace) and hands the
// records to the series store in batches, so the views fill while it reads and the UI never
// waits for the disk. Opening another file begins a new store trace, which makes an older
// load stop and drop its batches. A damaged or foreign file ends in failed(path, message)
// and leaves the trace that was open (store and following) as it was; only a file that
// fails after it began to replace it leaves the store empty.
//
// A trace still being written (an engine's --out file) is followed: with following on,
// a timer re-reads the file's extent and appends only what is new.
//
// An `analyze` report opens as a trace of one step (ReportTrace).
//
// Several files open as one comparison (TraceMerge): their runs side by side, named by
// file; they are read on the one worker and merged before the store sees them.
#pragma once

#include <QTimer>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "models/data_source.h"

namespace fp8scope::views {

class OpenTrace;
class TraceMerge;

class TraceFileLoader : public DataSource {
    Q_OBJECT
public:
    explicit TraceFileLoader(SeriesStore* store, QObject* parent = nullptr);
    ~TraceFileLoader() override;

    void open(const QString& path) { open(QStringList{path}); }
    // The traces of a comparison, overlaid; `name` in signals is the first path.
    void open(const QStringList& paths);
    // One data-parallel job's rank traces (rank_folder.h), rank 0's first: their runs side by
    // side, named by rank, and the store told each run's rank (TraceData::rank_runs).
    void openJob(const QStringList& paths);
    // Opens a file an engine is still creating: until it can be read (its objects exist
    // once the writer starts appending), every poll tries again; after `timeout_ms` the
    // last error is reported. Turns following on.
    void openGrowing(const QString& path, int timeout_ms = 30000);
    // Lets the open file go; a load still running stops at its next batch.
    void close() override;
    // Following re-reads a growing file every `interval_ms`.
    void setFollowing(bool on, int interval_ms = 500);
    bool following() const { return poll_.isActive(); }
    // Reads what was appended to the open file since the last read (a worker job).
    void poll();
    bool busy() const { return busy_.load() > 0; }
    // A plot shows steps [first, last]: when the open trace is an overview (a large trace,
    // open_trace.h) and the range holds at most kDetailSteps steps, its step records there
    // are read at full detail (a worker job) and replace the decimated ones; the range
    // shown before goes back to decimated. True when the open trace is an overview.
    bool showSteps(qint64 first, qint64 last);
    static constexpr qint64 kDetailSteps = 50000;
    // The Kernels view's timeline shows steps [first, last] of an overview, before its
    // newest: their op and kernel records are read (a worker job) and join the store
    // (TraceBatch::Ops). At most kRecordSteps steps. True when the open trace is an overview.
    bool showKernelRecords(qint64 first, qint64 last);
    static constexpr qint64 kRecordSteps = 1000;
    // The cursor stands at `step` of an overview: where the store holds that step's amax and
    // scale decimated (or not at all), they are read whole (a worker job); the step read for
    // the cursor before goes back to decimated. True when the open trace is an overview.
    bool showScalingAt(qint64 step);
    // The same for the kernel sums of every run at `step`, where the decimation left them
    // out (the Kernels view's table at the cursor step).
    bool showKernelSumsAt(qint64 step);
    // The step records from which on a trace opens as an overview (OpenTrace::kLargeStepRows
    // unless set; for the next open).
    void setLargeStepRows(std::uint64_t rows) { large_rows_ = rows; }

signals:
    void grew(const QString& path, qint64 last_step);  // a followed file had new records
    // While a file is first read: `percent` of its batches are in the store.
    void progress(const QString& path, int percent);

private:
    struct Pending;  // a file waiting to become readable
    // False on failure; the error is reported unless `quiet`.
    bool load(const QStringList& paths, bool quiet = false, bool job = false);
    void tryPending();
    // Reads what is new in the open file; throws Superseded when the store moved on. With
    // a `path`, reports progress under it.
    std::int64_t readNew(const QString& path = {});
    void fail(const QString& path, const QString& message);
    // After a failed load: empties the store if the load had begun to replace its trace.
    void dropPartial(bool replaced);

    QTimer poll_;
    // Touched only by the worker (one thread: loads and polls run in order).
    std::vector<std::unique_ptr<OpenTrace>> open_;  // empty: nothing open
    std::unique_ptr<TraceMerge> merge_;
    QString open_path_;
    std::unique_ptr<Pending> pending_;
    std::atomic<int> busy_{0};
    std::atomic<bool> overview_{false};  // the open trace is an overview
    std::atomic<std::uint64_t> large_rows_;
    std::optional<std::pair<qint64, qint64>> detailed_;  // worker only: the range read at full detail
    std::optional<qint64> scaling_at_;  // worker only: the step whose amax and scale were read for the cursor
    std::optional<qint64> kernel_sums_at_;  // worker only: the same for the kernel sums
    // Worker only: reads `at`'s records for the cursor (`make`) and puts the step read before
    // back to decimated (`what` of it) unless the zoom holds it whole.
    void showAt(std::optional<qint64>& at, qint64 step, int what,
                const std::function<TraceBatch(const OpenTrace&, qint64)>& make);
    // Worker only: delivers each overview part's batch from `make(part)`; false when the
    // store moved on.
    bool deliverParts(const std::function<TraceBatch(const OpenTrace&)>& make);
};

}  // namespace fp8scope::views
