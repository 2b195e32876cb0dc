#include "engine/data_parallel_step.h"

#include <cstdio>
#include <utility>

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
    mine.requests = encode_requests(shared);
    const std::vector<DataParallel::StepShare> all = dp_.exchange(mine);

    bool stop = false;
    for (const auto& s : all) {
        out.ranks.push_back(s.record);
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

}  // namespace fp8scope
