// The collectives of one rank of a data-parallel job (the trainer meets them through
// DataParallelStep, engine/data_parallel_step.h): every rank trains the same
// models on its own rows of each batch (BatchSampler::set_shard), and this class keeps
// the ranks identical. Each rank's backward gives its share of the gradient of the mean
// loss over all ranks' rows (Model::set_step_sync), so every activation gradient is the
// one a single process with the whole batch computes, and FP8 casts them alike; the
// shares are summed over ranks in buckets (grad_buckets.h; in float32, BF16 or FP8:
// fp8_grad_sum.h), each started as soon as backward has finished it
// (grads_ready), so the reduction overlaps the rest of backward; delayed
// scaling's amaxes are max-reduced before they are pushed, so every rank casts with the
// same scales. Per-tensor current scaling needs no reduction here: no tensor is sharded
// across ranks (a rank's activations are its own, the weights are the same everywhere).
//
// Small host values (losses, the ranks' step times, control requests) travel over the
// job's rendezvous connections, whose timeout bounds every wait: a rank that died or hangs
// ends the step on every other rank with an error naming it. Each step's compute times
// feed the in-flight health check (StragglerMonitor), and each rank's hash of its
// delayed-scaling state the check that the ranks still hold the same bits
// (data_parallel_state_check.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/data_parallel_state_check.h"
#include "engine/fp8_grad_sum.h"
#include "engine/fp8_grad_sum_error.h"
#include "engine/model.h"
#include "engine/rank_health.h"
#include "comm/rendezvous.h"
#include "engine/train_events.h"

namespace fp8scope {

struct DataParallelOptions {
    std::size_t bucket_bytes = std::size_t(25) << 20;  // gradient bucket in grad_dtype, as DDP's default
    double straggler_margin = 0.10;  // slower than the median compute time by more than this: slow
    int straggler_steps = 3;         // slow this many steps in a row: a straggler
    // The gradient sums travel in this type: F32; BF16 (half the bytes; each rank's share
    // and every partial sum rounded to BF16); or E4M3 or E5M2 (a quarter: FP8 codes with
    // a scale per chunk, added in float32, fp8_grad_sum.h). Buckets hold bucket_bytes of
    // this type. Every `measure_every` steps (and the first) the error a type other than
    // F32 added is measured against float32 sums of a sample of every bucket.
    DType grad_dtype = DType::F32;
    int measure_every = 100;
};

class DataParallel {
public:
    // `where`: this rank's device as reports name it ("cuda:1"); gathered from every rank.
    DataParallel(Rendezvous& rendezvous, Communicator& comm, const std::string& where,
                 DataParallelOptions options = {});

    int rank() const { return comm_->rank(); }
    int world_size() const { return comm_->world_size(); }
    DType grad_dtype() const { return options_.grad_dtype; }  // the type the gradient sums travel in
    Communicator& communicator() { return *comm_; }
    Rendezvous& rendezvous() { return rendezvous_; }
    // Elastic recovery: the job goes on over `comm`, a communicator of the rendezvous's new
    // world (collective: the ranks' devices are gathered again, the attached models'
    // buckets planned again over it and the health checks start afresh).
    void rebind(Communicator& comm);
    const std::string& where(int rank) const { return where_.at(std::size_t(rank)); }  // "host cuda:1"

    // Plans the gradient buckets of `model` (which must outlive this). Its backward() is to
    // call grads_ready() and defer its delayed amaxes for finish_backward()
    // (Model::set_step_sync, as DataParallelStep wires it).
    void attach(Model& model);
    // Starts the sums of the buckets whose last gradients backward's `stage` finished.
    void grads_ready(Model& model, int stage);
    // After model.backward(): the amaxes max-reduced and pushed; the backend's later work
    // (the optimizer) sees the summed gradients. The host does not wait.
    void finish_backward(Model& model);
    // Before a step's backward passes (1-based step number): whether this step measures.
    void begin_step(std::int64_t step);
    // Bytes this rank put into gradient sums since the last call, the relative L2 error
    // the compressed sums had at the last measurement (NaN: none since, or float32 sums)
    // and, for FP8 sums, their error against a BF16 shadow sum then.
    struct GradTraffic {
        double bytes = 0;
        double error = std::numeric_limits<double>::quiet_NaN();
        GradSumError fp8;
    };
    GradTraffic take_traffic();
    // Host time spent inside collectives since the last call (a synchronous communicator's
    // reductions are communication, not compute).
    double take_comm_host_ms();

    // The mean over ranks of each value, the same double on every rank: weighted by each
    // rank's rows of the batch when set_rows() gave rows that differ.
    std::vector<double> mean(const std::vector<double>& mine);
    // The rows of the batch each rank trains (rank order); empty or all equal: a plain mean.
    void set_rows(std::vector<int> rows) { rows_ = std::move(rows); }

    // What a rank says at the end of a step.
    struct StepShare {
        RankStepRecord record;
        bool stop = false;     // this rank was asked to stop
        std::uint64_t scaling_digest = 0;  // combined_digest() of its delayed-scaling state
        std::string requests;  // rank 0: the control requests every rank applies next
    };
    // Every rank's share of the step of `mine`: throws RendezvousError naming a rank whose
    // record is for another step or rank or holds a field out of range.
    std::vector<StepShare> exchange(const StepShare& mine);
    // A share as it travels (the record's fields one after another, then the requests),
    // and back: decode_share throws RendezvousError as exchange() does.
    static std::string encode_share(const StepShare& s);
    static StepShare decode_share(const std::string& blob, int from, std::int64_t step);
    // The in-flight check over a step's compute times (one per rank, in rank order).
    std::vector<StragglerMonitor::Alert> observe(std::int64_t step, const std::vector<RankStepRecord>& ranks);

    // The digest of this rank's delayed-scaling state after the step (every attached
    // model's; data_parallel_state_check.h), kept for check_scaling().
    std::uint64_t scaling_digest();
    // Given every rank's share of the step: when their digests differ, the ranks exchange
    // the per-tensor digests (a collective every rank enters, as they all see the same
    // shares) and this returns a finding per tensor that started to differ, naming it and
    // the ranks; empty when the ranks agree.
    std::vector<std::string> check_scaling(const std::vector<StepShare>& all);

private:
    struct Bucket {
        std::size_t offset = 0, count = 0;
        int stage = 0;  // backward stage that finishes its last tensor
    };
    // Per attached model: its buckets and, for compressed sums, the BF16 copy of its
    // gradients or the FP8 sums' buffers, and the float32 samples the error is measured on.
    struct Attached {
        Model* model = nullptr;
        std::vector<Bucket> buckets;
        DeviceBuffer<std::uint16_t> low;
        std::unique_ptr<Fp8GradSum> fp8;
        DeviceBuffer<float> sample;
        DeviceBuffer<std::uint16_t> shadow;  // FP8 sums: the sample's BF16 shadow sums
        std::vector<std::size_t> sample_at;  // per bucket: offset of its sample in `sample`
        bool sampled = false;                // this step copied samples
    };
    static constexpr std::size_t kSample = 4096;  // gradients per bucket in the error sample
    Attached& attached(const Model& model, const char* what);
    void reduce_bucket(Attached& a, const Bucket& b);
    void measure(Attached& a);
    template <class F>
    auto timed(F&& f);

    Rendezvous& rendezvous_;
    Communicator* comm_;
    std::vector<int> rows_;  // set_rows
    DataParallelOptions options_;
    std::vector<std::string> where_;
    std::string where_mine_;
    StragglerMonitor monitor_;
    double comm_host_ms_ = 0;
    std::vector<std::unique_ptr<Attached>> attached_;
    bool measuring_ = false;
    GradTraffic traffic_;
    std::vector<ScalingDigest> digests_;  // this step's, per tensor
    ScalingStateCheck scaling_check_;
};

}  // namespace fp8scope
