// Trace file loading on a worker thread: the jobs (open, wait for a growing file, poll),
// and what each tells the UI. The reading itself is OpenTrace's.
#include "models/trace_file_loader.h"

#include <QElapsedTimer>
#include <QFileInfo>
#include <algorithm>

#include "analysis_report_reader.h"
#include "models/open_trace.h"
#include "models/report_trace.h"
#include "models/trace_merge.h"
#include "trace_reader.h"

namespace fp8scope::views {

namespace {
struct Superseded {};  // the store moved on to a newer source
}  // namespace

struct TraceFileLoader::Pending {
    QString path;
    QElapsedTimer clock;
    int timeout_ms = 0;
};

TraceFileLoader::TraceFileLoader(SeriesStore* store, QObject* parent)
    : DataSource(store, 1, parent), large_rows_(OpenTrace::kLargeStepRows) {
    connect(&poll_, &QTimer::timeout, this, &TraceFileLoader::poll);
}

TraceFileLoader::~TraceFileLoader() {
    poll_.stop();
    shutdown();
}

void TraceFileLoader::open(const QStringList& paths) {
    ++busy_;
    workers().start([this, paths] {
        pending_.reset();
        load(paths);
        --busy_;
    });
}

void TraceFileLoader::openJob(const QStringList& paths) {
    ++busy_;
    workers().start([this, paths] {
        pending_.reset();
        load(paths, false, true);
        --busy_;
    });
}

void TraceFileLoader::openGrowing(const QString& path, int timeout_ms) {
    ++busy_;
    workers().start([this, path, timeout_ms] {
        pending_ = std::make_unique<Pending>();
        pending_->path = path;
        pending_->timeout_ms = timeout_ms;
        pending_->clock.start();
        tryPending();
        --busy_;
    });
    setFollowing(true);
}

void TraceFileLoader::tryPending() {
    const bool last_try = pending_->clock.elapsed() >= pending_->timeout_ms;
    if (load({pending_->path}, !last_try) || last_try) pending_.reset();
}

void TraceFileLoader::close() {
    poll_.stop();
    end();
    workers().start([this] {
        open_.clear();
        pending_.reset();
    });
}

void TraceFileLoader::setFollowing(bool on, int interval_ms) {
    if (on) poll_.start(interval_ms);
    else poll_.stop();
}

void TraceFileLoader::poll() {
    if (busy()) return;  // the previous read is still going; the next tick catches up
    ++busy_;
    workers().start([this] {
        if (open_.empty() && pending_) tryPending();
        if (!open_.empty()) {
            try {
                bool more = false;
                for (auto& part : open_) more = part->refresh() || more;
                if (more) {
                    const qint64 newest = readNew();
                    const QString path = open_path_;
                    if (newest >= 0) post([this, path, newest] { emit grew(path, newest); });
                }
            } catch (const Superseded&) {
                open_.clear();
            } catch (const std::exception& e) {
                open_.clear();
                fail(open_path_, QString::fromStdString(e.what()));
            }
        }
        --busy_;
    });
}

bool TraceFileLoader::showSteps(qint64 first, qint64 last) {
    if (!overview_) return false;
    workers().start([this, first, last] {
        if (open_.empty()) return;
        try {
            const bool detail = last >= first && last - first < kDetailSteps;
            const std::optional<std::pair<qint64, qint64>> want =
                detail ? std::optional(std::pair(first, last)) : std::nullopt;
            if (want == detailed_) return;
            for (std::size_t i = 0; i < open_.size(); ++i) {
                if (!open_[i]->overview()) continue;
                if (detailed_) {  // back to decimated where the plot was before
                    TraceBatch b = open_[i]->decimated(detailed_->first, detailed_->second);
                    merge_->remap(i, b);
                    if (!deliver(std::move(b))) return;
                }
                if (want) {
                    TraceBatch b = open_[i]->steps(first, last);
                    merge_->remap(i, b);
                    if (!deliver(std::move(b))) return;
                }
            }
            // The cursor's step read whole went back to decimated with the range left, or was
            // decimated anew with a wide one: read again.
            const auto holds = [&](const std::optional<qint64>& at) {
                const auto in = [&](const auto& range) { return range && *at >= range->first && *at <= range->second; };
                return at && (in(detailed_) || in(want));
            };
            if (holds(scaling_at_) && !deliverParts([&](const OpenTrace& t) { return t.scalingAt(*scaling_at_); }))
                return;
            if (holds(kernel_sums_at_) &&
                !deliverParts([&](const OpenTrace& t) { return t.kernelSumsAt(*kernel_sums_at_); }))
                return;
            detailed_ = want;
        } catch (const std::exception& e) {
            fail(open_path_, QString::fromStdString(e.what()));
        }
    });
    return true;
}

bool TraceFileLoader::deliverParts(const std::function<TraceBatch(const OpenTrace&)>& make) {
    for (std::size_t i = 0; i < open_.size(); ++i) {
        if (!open_[i]->overview()) continue;
        TraceBatch b = make(*open_[i]);
        if (b.empty()) continue;
        merge_->remap(i, b);
        if (!deliver(std::move(b))) return false;
    }
    return true;
}

bool TraceFileLoader::showKernelRecords(qint64 first, qint64 last) {
    if (!overview_) return false;
    first = std::max(first, last - kRecordSteps + 1);
    workers().start([this, first, last] {
        if (open_.empty()) return;
        try {
            deliverParts([&](const OpenTrace& t) { return t.kernelRecords(first, last); });
        } catch (const std::exception& e) {
            fail(open_path_, QString::fromStdString(e.what()));
        }
    });
    return true;
}

bool TraceFileLoader::showScalingAt(qint64 step) {
    if (!overview_) return false;
    workers().start([this, step] {
        showAt(scaling_at_, step, TraceBatch::Scaling, [](const OpenTrace& t, qint64 s) { return t.scalingAt(s); });
    });
    return true;
}

bool TraceFileLoader::showKernelSumsAt(qint64 step) {
    if (!overview_) return false;
    workers().start([this, step] {
        showAt(kernel_sums_at_, step, TraceBatch::KernelSums, [](const OpenTrace& t, qint64 s) { return t.kernelSumsAt(s); });
    });
    return true;
}

void TraceFileLoader::showAt(std::optional<qint64>& at, qint64 step, int what,
                             const std::function<TraceBatch(const OpenTrace&, qint64)>& make) {
    if (open_.empty() || at == step) return;
    try {
        const auto zoomed = [&](qint64 s) { return detailed_ && s >= detailed_->first && s <= detailed_->second; };
        // The step read before goes back to decimated (unless a zoom holds it whole).
        if (at && !zoomed(*at) && !deliverParts([&](const OpenTrace& t) { return t.decimated(*at, *at, what); }))
            return;
        at = step;
        deliverParts([&](const OpenTrace& t) { return make(t, step); });
    } catch (const std::exception& e) {
        fail(open_path_, QString::fromStdString(e.what()));
    }
}

void TraceFileLoader::fail(const QString& path, const QString& message) {
    post([this, path, message] { emit failed(path, message); });
}

std::int64_t TraceFileLoader::readNew(const QString& path) {
    int shown = -1;
    std::int64_t newest = -1;
    for (std::size_t i = 0; i < open_.size(); ++i) {
        // Each part is an equal share of the progress.
        const auto progress = [&](std::size_t done, std::size_t total) {
            const int percent = static_cast<int>((100 * i + 100 * done / total) / open_.size());
            if (path.isEmpty() || percent == shown) return;
            shown = percent;
            post([this, path, percent] { emit this->progress(path, percent); });
        };
        newest = std::max(newest, open_[i]->readNew([this, i](TraceBatch&& b) {
            merge_->remap(i, b);
            if (!deliver(std::move(b))) throw Superseded{};
        }, progress));
    }
    return newest;
}

bool TraceFileLoader::load(const QStringList& paths, bool quiet, bool job) {
    QElapsedTimer clock;
    clock.start();
    const QString path = paths.value(0);
    // Until the new files are open and their metadata read, what was loaded stays: a file
    // that cannot be read leaves the store and the followed file as they were.
    bool replaced = false;
    try {
        if (paths.size() == 1 && is_analysis_report(path.toStdString())) {
            // A report is read whole: one step, and nothing to follow.
            ReportTrace r = report_as_trace(read_analysis_report(path.toStdString()), QFileInfo(path).fileName().toStdString());
            open_.clear();
            replaced = true;
            begin(std::move(r.meta));
            post([this, path] { emit opened(path); });
            if (!deliver(std::move(r.batch))) throw Superseded{};
        } else {
            std::vector<std::unique_ptr<OpenTrace>> opened_files;
            std::vector<TraceMerge::Part> parts;
            std::vector<int> ranks;
            for (const QString& p : paths) {
                opened_files.push_back(std::make_unique<OpenTrace>(p.toStdString(), large_rows_.load()));
                const trace::TraceMeta& m = opened_files.back()->meta();
                if (job && std::find(ranks.begin(), ranks.end(), m.rank) != ranks.end())
                    throw trace::TraceError(p.toStdString(), "was written by rank " + std::to_string(m.rank) +
                                                                 ", as another trace of the job was");
                ranks.push_back(m.rank);
                parts.push_back({job ? QStringLiteral("rank %1").arg(m.rank) : QFileInfo(p).fileName(), m});
            }
            auto merge = std::make_unique<TraceMerge>(std::move(parts));
            overview_ = std::any_of(opened_files.begin(), opened_files.end(), [](const auto& f) { return f->overview(); });
            detailed_.reset();
            scaling_at_.reset();
            kernel_sums_at_.reset();
            open_ = std::move(opened_files);
            merge_ = std::move(merge);
            replaced = true;
            open_path_ = path;
            begin(merge_->meta(), job ? merge_->rankRuns() : std::vector<RankRun>{});
            post([this, path] { emit opened(path); });
            readNew(path);
        }
        const qint64 ms = clock.elapsed();
        post([this, path, ms] { emit finished(path, ms); });
        return true;
    } catch (const Superseded&) {
        open_.clear();
        return true;  // a newer source took over: nothing to retry
    } catch (const trace::TraceError& e) {
        dropPartial(replaced);
        if (!quiet) fail(path, QString::fromStdString(e.what()));
    } catch (const std::exception& e) {
        dropPartial(replaced);
        if (!quiet) fail(path, QStringLiteral("%1: %2").arg(path, QString::fromStdString(e.what())));
    }
    return false;
}

void TraceFileLoader::dropPartial(bool replaced) {
    if (!replaced) return;  // the failure came before anything was replaced
    open_.clear();
    store()->clear();
}

}  // namespace fp8scope::views
