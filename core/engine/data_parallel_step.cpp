#include "engine/data_parallel_step.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "engine/data.h"

namespace fp8scope {
namespace {

double ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

void DataParallelStep::attach(Model& model) {
    dp_.attach(model);
    model.set_step_sync(this);
    ++runs_;
}

void DataParallelStep::begin_step(std::int64_t step) {
    dp_.begin_step(step);
    compute_ms_ = comm_ms_ = 0;
    rank_loss_ = 0;
}

void DataParallelStep::begin_run() {
    run_start_ = clock::now();
    dp_.take_comm_host_ms();  // from here on: this run's share
}

float DataParallelStep::loss(int run, float mine) {
    if (run == 0) rank_loss_ = mine;
    return static_cast<float>(dp_.mean({double(mine)})[0]);
}

// Waits for the run's gradient sums and splits the time since begin_run() into this rank's
// compute and its communication (the loss exchange, synchronous reductions and the wait for
// the sums still running when backward's compute is done).
void DataParallelStep::finish_backward(Model& model) {
    model.backend().synchronize();
    const auto computed = clock::now();
    const double waited = dp_.take_comm_host_ms();
    dp_.finish_backward(model);
    dp_.communicator().synchronize();
    dp_.take_comm_host_ms();
    compute_ms_ += ms(computed - run_start_) - waited;
    comm_ms_ += waited + ms(clock::now() - computed);
}

std::deque<ControlRequest> DataParallelStep::requests_due(std::deque<ControlRequest> local) {
    for (ControlRequest& r : local) held_.push_back(std::move(r));  // they wait for the step's agreement
    return std::exchange(agreed_, {});
}

StepAgreement DataParallelStep::agree(std::int64_t step, double step_ms, std::deque<ControlRequest> local) {
    for (ControlRequest& r : local) held_.push_back(std::move(r));
    StepAgreement out;
    DataParallel::StepShare mine;
    const DataParallel::GradTraffic traffic = dp_.take_traffic();
    mine.record = RankStepRecord{step,          rank(),        compute_ms_,     comm_ms_,
                                 step_ms,       rank_loss_,    traffic.bytes,   traffic.error,
                                 nonfinite_step_, traffic.fp8.snr_db, traffic.fp8.underflow_pct, traffic.fp8.overflow_pct};
    mine.scaling_digest = dp_.scaling_digest();
    std::deque<ControlRequest> shared;
    for (ControlRequest& r : std::exchange(held_, {})) {
        if (r.kind == ControlRequest::Stop) mine.stop = true;
        else if (r.kind == ControlRequest::Pause || r.kind == ControlRequest::Resume)
            out.refused.push_back("pause and resume are not available in a data-parallel run (stop instead)");
        else if (rank() == 0) shared.push_back(std::move(r));
        else out.refused.push_back("control requests go to rank 0 of a data-parallel run; rank " +
                                   std::to_string(rank()) + " ignored one");
    }
    // Ranks waiting to join an elastic job are admitted at the next step boundary, every
    // rank told in this exchange.
    if (rank() == 0 && elastic())
        if (const std::vector<int> due = dp_.rendezvous().joiners_due(); !due.empty()) {
            std::string ranks;
            for (int r : due) ranks += (ranks.empty() ? "" : " ") + std::to_string(r);
            shared.push_back({ControlRequest::Admit, -1, ranks});
        }
    mine.requests = encode_requests(shared);
    const std::vector<DataParallel::StepShare> all = dp_.exchange(mine);

    bool stop = false;
    const std::vector<int>& launched = dp_.rendezvous().launch_ranks();
    for (const auto& s : all) {
        out.ranks.push_back(s.record);
        // A rank's records keep the number it was launched with when an elastic job
        // renumbers the ranks, so its series in the trace stays its own.
        if (launched.size() == all.size()) out.ranks.back().rank = launched[std::size_t(s.record.rank)];
        stop = stop || s.stop;
    }
    for (const StragglerMonitor::Alert& a : dp_.observe(step, out.ranks)) {
        char figures[96];
        std::snprintf(figures, sizeof figures, "%.1f ms compute vs median %.1f ms", a.ms, a.median_ms);
        out.health.push_back((a.straggling ? "straggler: rank " : "recovered: rank ") + std::to_string(a.rank) + " (" +
                             dp_.where(a.rank) + ") " + figures);
    }
    out.scaling = dp_.check_scaling(all);
    agreed_ = decode_requests(all[0].requests, runs_, book_);
    if (stop) agreed_.push_back({ControlRequest::Stop, -1, {}});
    return out;
}

void DataParallelStep::set_batch_rows(int rows) {
    batch_rows_ = rows;
    std::vector<int> each;
    for (int r = 0; r < world_size(); ++r) each.push_back(shard_rows(rows, world_size(), r));
    dp_.set_rows(std::move(each));
}

namespace {

// A rank's record in the recovery round: the step it was in, then the steps of its
// snapshots, 8 bytes each.
std::string encode_steps(std::int64_t failed, const std::vector<std::int64_t>& snapshots) {
    std::string out(reinterpret_cast<const char*>(&failed), sizeof failed);
    for (std::int64_t s : snapshots) out.append(reinterpret_cast<const char*>(&s), sizeof s);
    return out;
}

std::vector<std::int64_t> decode_steps(const std::string& blob, int rank) {
    if (blob.empty() || blob.size() % sizeof(std::int64_t) != 0)
        throw RendezvousError("rank " + std::to_string(rank) + " sent a recovery record of " +
                              std::to_string(blob.size()) + " bytes");
    std::vector<std::int64_t> out(blob.size() / sizeof(std::int64_t));
    std::memcpy(out.data(), blob.data(), blob.size());
    return out;
}

}  // namespace

WorldChange DataParallelStep::change_world(const std::exception& fault, std::int64_t failed_step,
                                           const std::vector<std::int64_t>& snapshots) {
    if (!elastic()) return StepSync::change_world(fault, failed_step, snapshots);
    if (elastic_.recovering) elastic_.recovering();
    const auto* seen = dynamic_cast<const WorldFault*>(&fault);
    Rendezvous& rv = dp_.rendezvous();
    const std::vector<int> launched = rv.launch_ranks();
    const Rendezvous::NewWorld world = rv.agree_world(encode_steps(failed_step, snapshots),
                                                      seen ? seen->lost() : std::vector<int>{});
    WorldChange out;
    for (int r : world.lost) out.lost.push_back(launched.at(std::size_t(r)));
    out.old_world = world.old_world;
    out.new_world = rv.world_size();
    out.why = fault.what();
    // Rank 0 lost: the survivors met at the lowest of them, rank 0 now.
    if (!world.lost.empty() && world.lost[0] == 0)
        out.why += "; rank " + std::to_string(rv.launch_ranks().at(0)) + " is the hub now";
    if (world.lost.empty())
        throw RendezvousError(std::string("the recovery round found every rank alive, so the failure was not a lost "
                                          "rank: ") + fault.what());
    // The latest snapshot every survivor holds: a rank may have taken one the others did
    // not reach when the rank was lost at a snapshot step.
    std::vector<std::int64_t> common;
    for (std::size_t r = 0; r < world.records.size(); ++r) {
        std::vector<std::int64_t> steps = decode_steps(world.records[r], int(r));
        out.failed_step = std::max(out.failed_step, steps[0]);
        steps.erase(steps.begin());
        std::sort(steps.begin(), steps.end());
        if (r == 0) common = steps;
        else std::erase_if(common, [&](std::int64_t s) { return !std::binary_search(steps.begin(), steps.end(), s); });
    }
    if (common.empty()) throw RendezvousError("no rewind snapshot is held by every surviving rank");
    out.restore_step = common.back();
    try {
        dp_.rebind(elastic_.new_communicator());
    } catch (const WorldFault& f) {
        std::vector<int> launched;
        for (int r : f.lost()) launched.push_back(rv.launch_ranks().at(std::size_t(r)));
        throw RendezvousError("a second failure during the recovery" +
                              (launched.empty() ? std::string() : " (rank " + rank_list(launched) + " as launched)") +
                              ": " + f.what());
    }
    held_.clear();
    agreed_.clear();
    if (batch_rows_ > 0) set_batch_rows(batch_rows_);
    return out;
}

WorldJoin DataParallelStep::admit(const std::vector<int>& ranks, const std::function<std::string()>& state) {
    if (!elastic()) return StepSync::admit(ranks, state);
    Rendezvous& rv = dp_.rendezvous();
    const Rendezvous::Admission a = rv.admit(ranks, state);
    WorldJoin out;
    out.joined = a.joined;
    out.failed = a.failed;
    out.old_world = a.old_world;
    out.new_world = rv.world_size();
    if (rank() == 0 && elastic_.join_failed)
        for (const auto& f : a.failed) elastic_.join_failed(f.first);
    if (a.joined.empty()) return out;
    dp_.rebind(elastic_.new_communicator());  // collective with the joiners' first: a WorldFault is a lost rank
    if (batch_rows_ > 0) set_batch_rows(batch_rows_);
    return out;
}

}  // namespace fp8scope
