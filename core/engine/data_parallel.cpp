#include "engine/data_parallel.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <utility>

#include "engine/grad_buckets.h"
#include "util/host_name.h"

namespace fp8scope {
namespace {

// A StepShare on the wire: the record's numbers, the stop flag, then the requests.
struct WireShare {
    std::int64_t step;
    std::int32_t rank, stop;
    double compute_ms, comm_ms, step_ms;
    float loss;
};

std::string encode(const DataParallel::StepShare& s) {
    WireShare w{s.record.step, s.record.rank, s.stop ? 1 : 0, s.record.compute_ms, s.record.comm_ms,
                s.record.step_ms, s.record.loss};
    std::string out(sizeof w, '\0');
    std::memcpy(out.data(), &w, sizeof w);
    return out + s.requests;
}

DataParallel::StepShare decode(const std::string& blob, int from) {
    WireShare w{};
    if (blob.size() < sizeof w)
        throw RendezvousError("rank " + std::to_string(from) + " sent a step record of " +
                              std::to_string(blob.size()) + " bytes (ranks of different engine versions?)");
    std::memcpy(&w, blob.data(), sizeof w);
    DataParallel::StepShare s;
    s.record = RankStepRecord{w.step, w.rank, w.compute_ms, w.comm_ms, w.step_ms, w.loss};
    s.stop = w.stop != 0;
    s.requests = blob.substr(sizeof w);
    return s;
}

}  // namespace

DataParallel::DataParallel(Rendezvous& rendezvous, Communicator& comm, const std::string& where,
                           DataParallelOptions options)
    : rendezvous_(rendezvous),
      comm_(comm),
      options_(options),
      monitor_(comm.world_size(), options.straggler_margin, options.straggler_steps) {
    if (rendezvous.world_size() != comm.world_size() || rendezvous.rank() != comm.rank())
        throw std::invalid_argument("data parallel: the communicator is rank " + std::to_string(comm.rank()) + " of " +
                                    std::to_string(comm.world_size()) + ", the rendezvous rank " +
                                    std::to_string(rendezvous.rank()) + " of " + std::to_string(rendezvous.world_size()));
    where_ = rendezvous_.all_gather(host_name() + " " + where);
}

template <class F>
auto DataParallel::timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    comm_host_ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double DataParallel::take_comm_host_ms() {
    return std::exchange(comm_host_ms_, 0.0);
}

void DataParallel::attach(Model& model) {
    const auto& tensors = model.param_tensors();
    std::vector<Bucket> buckets;
    for (const GradBucket& g : plan_grad_buckets(tensors, sizeof(float), options_.bucket_bytes)) {
        Bucket b{g.offset, g.count, 0};
        for (std::size_t t : g.tensors) b.stage = std::max(b.stage, tensors[t].stage);
        buckets.push_back(b);
    }
    // Every rank starts the same buckets in the same order: backward's stages come in one
    // order, and within a stage the plan's.
    model.set_grad_ready([this, &model, buckets = std::move(buckets)](int stage) {
        float* grads = model.grads().data();
        for (const Bucket& b : buckets)
            if (b.stage == stage) timed([&] { comm_.all_reduce(grads + b.offset, std::int64_t(b.count), ReduceOp::Sum); });
    });
    model.set_loss_ranks(world_size());
    model.defer_amax_pushes(true);
}

void DataParallel::finish_backward(Model& model) {
    timed([&] {
        if (model.has_pending_amaxes()) {
            std::span<float> amax = model.pending_amaxes();
            comm_.all_reduce(amax.data(), std::int64_t(amax.size()), ReduceOp::Max);
        }
        comm_.join();
    });
    model.push_pending_amaxes();
}

std::vector<double> DataParallel::mean(const std::vector<double>& mine) {
    std::vector<double> sum(mine.size(), 0.0);
    timed([&] {
        const std::string blob(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
        const std::vector<std::string> all = rendezvous_.all_gather(blob);
        for (std::size_t r = 0; r < all.size(); ++r) {
            if (all[r].size() != blob.size())
                throw RendezvousError("rank " + std::to_string(r) + " sent " + std::to_string(all[r].size() / 8) +
                                      " values, expected " + std::to_string(mine.size()));
            std::vector<double> v(mine.size());
            std::memcpy(v.data(), all[r].data(), all[r].size());
            for (std::size_t i = 0; i < v.size(); ++i) sum[i] += v[i];  // rank order on every rank
        }
    });
    for (double& s : sum) s /= double(world_size());
    return sum;
}

std::vector<DataParallel::StepShare> DataParallel::exchange(const StepShare& mine) {
    std::vector<StepShare> out;
    timed([&] {
        const std::vector<std::string> all = rendezvous_.all_gather(encode(mine));
        for (std::size_t r = 0; r < all.size(); ++r) out.push_back(decode(all[r], int(r)));
    });
    return out;
}

std::vector<StragglerMonitor::Alert> DataParallel::observe(std::int64_t step,
                                                           const std::vector<RankStepRecord>& ranks) {
    std::vector<double> ms;
    for (const RankStepRecord& r : ranks) ms.push_back(r.compute_ms);
    return monitor_.observe(step, ms);
}

}  // namespace fp8scope
