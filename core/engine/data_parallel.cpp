#include "engine/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "engine/grad_buckets.h"
#include "util/host_name.h"

namespace fp8scope {
namespace {

// A StepShare on the wire: the record's numbers, the stop flag, the scaling digest, then
// the requests. The fields go one after another in this order, 100 bytes with no padding
// between them (a struct's padding would carry whatever the stack held to every peer).
// Ranks of another layout do not meet: the rendezvous hello carries its version.
struct WireShare {
    std::int64_t step;
    std::int32_t rank, stop;
    double compute_ms, comm_ms, step_ms;
    float loss;
    double grad_bytes, grad_error;
    std::int64_t nonfinite_step;
    double grad_snr_db, grad_underflow_pct, grad_overflow_pct;
    std::uint64_t scaling_digest;
};

// Calls f on every field of `w` in wire order.
template <class W, class F>
void for_each_field(W& w, F&& f) {
    f(w.step), f(w.rank), f(w.stop), f(w.compute_ms), f(w.comm_ms), f(w.step_ms), f(w.loss), f(w.grad_bytes),
        f(w.grad_error), f(w.nonfinite_step), f(w.grad_snr_db), f(w.grad_underflow_pct), f(w.grad_overflow_pct),
        f(w.scaling_digest);
}

std::size_t wire_bytes() {
    std::size_t n = 0;
    WireShare w{};
    for_each_field(w, [&](const auto& v) { n += sizeof v; });
    return n;
}

}  // namespace

std::string DataParallel::encode_share(const StepShare& s) {
    const WireShare w{s.record.step,           s.record.rank,        s.stop ? 1 : 0,
                      s.record.compute_ms,     s.record.comm_ms,     s.record.step_ms,
                      s.record.loss,           s.record.grad_bytes,  s.record.grad_error,
                      s.record.nonfinite_step, s.record.grad_snr_db, s.record.grad_underflow_pct,
                      s.record.grad_overflow_pct, s.scaling_digest};
    std::string out;
    for_each_field(w, [&](const auto& v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); });
    return out + s.requests;
}

namespace {

// Why a rank's record for `step` cannot be trusted; empty when every field is in range.
std::string invalid(const WireShare& w, const std::string& requests, int from, std::int64_t step) {
    if (w.step != step) return "step " + std::to_string(w.step) + ", expected " + std::to_string(step);
    if (w.rank != from) return "rank " + std::to_string(w.rank) + ", expected " + std::to_string(from);
    if (w.stop != 0 && w.stop != 1) return "stop flag " + std::to_string(w.stop) + ", expected 0 or 1";
    // Compute and communication are differences of clock readings: finite, of either sign.
    if (!std::isfinite(w.compute_ms) || !std::isfinite(w.comm_ms) || !std::isfinite(w.step_ms) || w.step_ms < 0)
        return "times " + std::to_string(w.compute_ms) + ", " + std::to_string(w.comm_ms) + ", " +
               std::to_string(w.step_ms) + " ms, expected finite (the step's not negative)";
    if (!std::isfinite(w.grad_bytes) || w.grad_bytes < 0)
        return "gradient bytes " + std::to_string(w.grad_bytes) + ", expected finite and not negative";
    if (!std::isnan(w.grad_error) && !(std::isfinite(w.grad_error) && w.grad_error >= 0))
        return "gradient error " + std::to_string(w.grad_error) + ", expected NaN or finite and not negative";
    // An SNR is +Inf where the sums were equal; a percentage lies in [0, 100].
    if (!std::isnan(w.grad_snr_db) && !(w.grad_snr_db > -INFINITY))
        return "gradient SNR " + std::to_string(w.grad_snr_db) + " dB, expected NaN or above -inf";
    for (double pct : {w.grad_underflow_pct, w.grad_overflow_pct})
        if (!std::isnan(pct) && !(pct >= 0 && pct <= 100))
            return "gradient sum percentage " + std::to_string(pct) + ", expected NaN or 0 to 100";
    // A step a rewind went back from may lie ahead of this one.
    if (w.nonfinite_step < 0) return "non-finite step " + std::to_string(w.nonfinite_step) + ", expected 0 or more";
    if (from != 0 && !requests.empty()) return "control requests, which only rank 0 sends";
    return {};
}

}  // namespace

DataParallel::StepShare DataParallel::decode_share(const std::string& blob, int from, std::int64_t step) {
    const std::size_t n = wire_bytes();
    if (blob.size() < n)
        throw RendezvousError("rank " + std::to_string(from) + " sent a step record of " +
                              std::to_string(blob.size()) + " bytes (ranks of different engine versions?)");
    WireShare w{};
    std::size_t at = 0;
    for_each_field(w, [&](auto& v) {
        std::memcpy(&v, blob.data() + at, sizeof v);
        at += sizeof v;
    });
    DataParallel::StepShare s;
    s.requests = blob.substr(n);
    if (const std::string why = invalid(w, s.requests, from, step); !why.empty())
        throw RendezvousError("rank " + std::to_string(from) + " sent a step record with " + why);
    s.record = RankStepRecord{w.step,    w.rank, w.compute_ms, w.comm_ms,          w.step_ms,
                              w.loss,    w.grad_bytes, w.grad_error, w.nonfinite_step, w.grad_snr_db,
                              w.grad_underflow_pct, w.grad_overflow_pct};
    s.stop = w.stop != 0;
    s.scaling_digest = w.scaling_digest;
    return s;
}

DataParallel::DataParallel(Rendezvous& rendezvous, Communicator& comm, const std::string& where,
                           DataParallelOptions options)
    : rendezvous_(rendezvous),
      comm_(&comm),
      options_(options),
      monitor_(comm.world_size(), options.straggler_margin, options.straggler_steps) {
    if (rendezvous.world_size() != comm.world_size() || rendezvous.rank() != comm.rank())
        throw std::invalid_argument("data parallel: the communicator is rank " + std::to_string(comm.rank()) + " of " +
                                    std::to_string(comm.world_size()) + ", the rendezvous rank " +
                                    std::to_string(rendezvous.rank()) + " of " + std::to_string(rendezvous.world_size()));
    where_mine_ = host_name() + " " + where;
    where_ = rendezvous_.all_gather(where_mine_);
}

void DataParallel::rebind(Communicator& comm) {
    if (rendezvous_.world_size() != comm.world_size() || rendezvous_.rank() != comm.rank())
        throw std::invalid_argument("data parallel: the new communicator is rank " + std::to_string(comm.rank()) +
                                    " of " + std::to_string(comm.world_size()) + ", the rendezvous rank " +
                                    std::to_string(rendezvous_.rank()) + " of " +
                                    std::to_string(rendezvous_.world_size()));
    comm_ = &comm;
    where_ = rendezvous_.all_gather(where_mine_);
    monitor_ = StragglerMonitor(comm.world_size(), options_.straggler_margin, options_.straggler_steps);
    scaling_check_ = ScalingStateCheck();
    std::vector<Model*> models;
    for (const auto& a : attached_) models.push_back(a->model);
    attached_.clear();
    for (Model* m : models) attach(*m);
    traffic_ = GradTraffic{};
    rows_.clear();
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
    const DType type = options_.grad_dtype;
    if (type == DType::E8M0)
        throw std::invalid_argument(std::string("data parallel: gradient sums in ") + dtype_name(type) +
                                    " are not supported (f32, bf16, e4m3, e5m2)");
    auto a = std::make_unique<Attached>();
    a->model = &model;
    const auto& tensors = model.param_tensors();
    std::size_t samples = 0, largest = 0;
    for (const GradBucket& g : plan_grad_buckets(tensors, dtype_size(type), options_.bucket_bytes)) {
        Bucket b{g.offset, g.count, 0};
        for (std::size_t t : g.tensors) b.stage = std::max(b.stage, tensors[t].stage);
        a->buckets.push_back(b);
        a->sample_at.push_back(samples);
        samples += std::min(kSample, b.count);
        largest = std::max(largest, b.count);
    }
    if (type != DType::F32) a->sample = DeviceBuffer<float>(model.backend(), samples);
    if (type == DType::E4M3 || type == DType::E5M2) a->shadow = DeviceBuffer<std::uint16_t>(model.backend(), samples);
    if (type == DType::BF16) a->low = DeviceBuffer<std::uint16_t>(model.backend(), model.num_params());
    if (type == DType::E4M3 || type == DType::E5M2)
        a->fp8 = std::make_unique<Fp8GradSum>(model.backend(), *comm_,
                                              type == DType::E4M3 ? Format::E4M3 : Format::E5M2, largest);
    attached_.push_back(std::move(a));
}

DataParallel::Attached& DataParallel::attached(const Model& model, const char* what) {
    for (auto& a : attached_)
        if (a->model == &model) return *a;
    throw std::logic_error(std::string("data parallel: ") + what + " of a model never attached");
}

// Every rank starts the same buckets in the same order: backward's stages come in one
// order, and within a stage the plan's.
void DataParallel::grads_ready(Model& model, int stage) {
    Attached& a = attached(model, "grads_ready");
    for (const Bucket& b : a.buckets)
        if (b.stage == stage) timed([&] { reduce_bucket(a, b); });
}

void DataParallel::begin_step(std::int64_t step) {
    measuring_ = options_.grad_dtype != DType::F32 &&
                 (step == 1 || (options_.measure_every > 0 && step % options_.measure_every == 0));
}

void DataParallel::reduce_bucket(Attached& a, const Bucket& b) {
    float* grads = a.model->grads().data() + b.offset;
    if (options_.grad_dtype == DType::F32) {
        traffic_.bytes += double(b.count) * 4;
        comm_->all_reduce(grads, std::int64_t(b.count), ReduceOp::Sum);
        return;
    }
    Backend& backend = a.model->backend();
    const std::size_t k = std::size_t(&b - a.buckets.data());
    if (measuring_) {  // this rank's share of the sample, before it is rounded
        backend.copy(a.sample.data() + a.sample_at[k], grads, std::min(kSample, b.count) * sizeof(float));
        a.sampled = true;
    }
    if (a.fp8) {
        traffic_.bytes += double(a.fp8->sum(grads, std::int64_t(b.count)));
        return;
    }
    traffic_.bytes += double(b.count) * 2;
    std::uint16_t* low = a.low.data() + b.offset;
    backend.convert(low, DType::BF16, grads, DType::F32, std::int64_t(b.count));
    comm_->all_reduce(low, DType::BF16, std::int64_t(b.count), ReduceOp::Sum);
}

void DataParallel::finish_backward(Model& model) {
    Attached* a = &attached(model, "finish_backward");
    timed([&] {
        if (a->sampled) {
            const auto n = std::int64_t(a->sample.size());
            if (a->fp8) bf16_shadow_sum(model.backend(), *comm_, a->sample.data(), a->shadow.data(), n);
            comm_->all_reduce(a->sample.data(), n, ReduceOp::Sum);
        }
        if (model.has_pending_amaxes()) {
            std::span<float> amax = model.pending_amaxes();
            comm_->all_reduce(amax.data(), std::int64_t(amax.size()), ReduceOp::Max);
        }
        comm_->join();
    });
    if (options_.grad_dtype == DType::BF16)
        model.backend().convert(model.grads().data(), DType::F32, a->low.data(), DType::BF16,
                                std::int64_t(model.num_params()));
    model.push_pending_amaxes();
    if (a->sampled) measure(*a);
}

// The relative L2 error of the compressed sums over the sample: each bucket's first
// gradients summed in float32 against the same gradients as the BF16 or FP8 sums left them.
void DataParallel::measure(Attached& a) {
    a.sampled = false;
    Backend& backend = a.model->backend();
    std::vector<float> exact(a.sample.size()), got(a.sample.size());
    backend.copy_to_host(exact.data(), a.sample.data(), exact.size() * sizeof(float));
    for (std::size_t k = 0; k < a.buckets.size(); ++k)
        backend.copy_to_host(got.data() + a.sample_at[k], a.model->grads().data() + a.buckets[k].offset,
                             std::min(kSample, a.buckets[k].count) * sizeof(float));
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < exact.size(); ++i) {
        const double d = double(got[i]) - double(exact[i]);
        err += d * d;
        ref += double(exact[i]) * double(exact[i]);
    }
    traffic_.error = ref > 0 ? std::sqrt(err / ref) : 0.0;
    if (a.fp8) {
        std::vector<std::uint16_t> shadow(a.shadow.size());
        backend.copy_to_host(shadow.data(), a.shadow.data(), shadow.size() * sizeof(std::uint16_t));
        traffic_.fp8 = grad_sum_error(got, shadow);
    }
}

DataParallel::GradTraffic DataParallel::take_traffic() { return std::exchange(traffic_, GradTraffic{}); }

std::vector<double> DataParallel::mean(const std::vector<double>& mine) {
    std::vector<double> sum(mine.size(), 0.0), v(mine.size());
    std::vector<std::string> all;
    timed([&] {
        const std::string_view blob(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(double));
        all = rendezvous_.all_gather_same_size(blob, "mean over ranks");
        for (const std::string& r : all) {
            std::memcpy(v.data(), r.data(), r.size());
            for (std::size_t i = 0; i < v.size(); ++i) sum[i] += v[i];  // rank order on every rank
        }
    });
    const bool weighted = rows_.size() == std::size_t(world_size()) &&
                          std::any_of(rows_.begin(), rows_.end(), [&](int n) { return n != rows_[0]; });
    if (!weighted) {
        for (double& s : sum) s /= double(world_size());
        return sum;
    }
    // Uneven rows: each rank's mean counts by its rows (rank order on every rank).
    std::vector<double> out(mine.size(), 0.0);
    double rows = 0;
    for (int n : rows_) rows += n;
    for (std::size_t r = 0; r < all.size(); ++r) {
        std::memcpy(v.data(), all[r].data(), all[r].size());
        for (std::size_t i = 0; i < v.size(); ++i) out[i] += v[i] * rows_[r];
    }
    for (double& s : out) s /= rows;
    return out;
}

std::vector<DataParallel::StepShare> DataParallel::exchange(const StepShare& mine) {
    std::vector<StepShare> out;
    timed([&] {
        const std::vector<std::string> all = rendezvous_.all_gather(encode_share(mine));
        for (std::size_t r = 0; r < all.size(); ++r) out.push_back(decode_share(all[r], int(r), mine.record.step));
    });
    return out;
}

std::uint64_t DataParallel::scaling_digest() {
    std::vector<const Model*> models;
    for (const auto& a : attached_) models.push_back(a->model);
    digests_ = scaling_digests(models);
    return combined_digest(digests_);
}

std::vector<std::string> DataParallel::check_scaling(const std::vector<StepShare>& all) {
    const bool agree = std::all_of(all.begin(), all.end(),
                                   [&](const StepShare& s) { return s.scaling_digest == all[0].scaling_digest; });
    if (agree) return scaling_check_.report({});
    std::vector<std::vector<std::uint64_t>> per_rank;
    timed([&] {
        for (const std::string& blob : rendezvous_.all_gather(encode_digests(digests_)))
            per_rank.push_back(decode_digests(blob));
    });
    return scaling_check_.report(find_mismatches(per_rank, digests_));
}

std::vector<StragglerMonitor::Alert> DataParallel::observe(std::int64_t step,
                                                           const std::vector<RankStepRecord>& ranks) {
    std::vector<double> ms;
    for (const RankStepRecord& r : ranks) ms.push_back(r.compute_ms);
    return monitor_.observe(step, ms);
}

}  // namespace fp8scope
