// The training loop, its control requests and its recovery.
#include "engine/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <thread>

#include "engine/deferred_sink.h"
#include "engine/memory_estimate.h"
#include "engine/op_timer.h"
#include "engine/pretrained.h"
#include "util/parallel.h"

namespace fp8scope {

struct Trainer::Run {
    Run(const TrainConfig& c, const std::string& recipe_name, std::uint64_t run_seed, Backend& backend)
        : model(c.model, backend), seed(run_seed) {
        model.init(seed, c.hidden_init_std());
        model.set_plan(c.recipe_book().plan(recipe_name, model.linears()));
        model.set_injections(c.inject, std::int64_t(c.batch_size) * c.seq_len);
        adam.emplace(c.optimizer, model.param_tensors(), model.num_params(), backend);
    }
    Model model;
    std::uint64_t seed;                // initial weights, batches and stochastic rounding
    std::optional<AdamW> adam;
    std::deque<float> recent_losses;   // spike-detection window
    CaptureSink* sink = nullptr;
    float last_loss = std::numeric_limits<float>::quiet_NaN();
    std::optional<float> last_eval;
    bool nonfinite_reported = false;   // its first NaN/Inf is on record
    DeferredSink held;                 // its sink's calls while the runs go at once
};

// One run's part of a step, as its thread left it for the training thread, which settles
// the runs in order. `stop`: where the part ended early, as the loop of runs one after
// another would have returned there.
struct Trainer::RunStep {
    enum class Stop : std::uint8_t { None, Loss, Spike, GradNorm };
    Stop stop = Stop::None;
    float loss = 0;
    bool own_finite = true;   // this rank's own loss was finite
    double spike_mean = 0;    // Stop::Spike: the moving average it was over
    double norm = 0;
    std::optional<NonFiniteRecord> found;  // the watch's record, polled after the norm
    double seconds = 0;
    std::exception_ptr error;  // thrown in a run's thread; rethrown in the training thread
};

Trainer::Trainer(const TrainConfig& config, Backend& backend, StepSync* sync, const TrainState* joined)
    : config_(config), backend_(backend), sync_(sync ? sync : &single_) {
    config_.validate();
    if (config_.device != device_name(backend.device()))
        throw std::invalid_argument("config asks for device '" + config_.device + "', the backend is " +
                                    device_name(backend.device()));
    // Memory check (memory_estimate.h): refuse a config this machine cannot hold before
    // allocating any of it. On a GPU only the host part is compared here.
    require_memory(estimate_memory(config_, dtype_size(backend.activation_dtype())), available_memory(),
                   backend.device() != Device::CPU);
    const int world = sync_->world_size();
    std::optional<TrainState> resumed;
    if (joined) resumed = *joined;
    else if (!config_.checkpoint.resume.empty()) resumed = load_checkpoint(config_.checkpoint.resume);
    // An elastic job keeps its global batch on another number of ranks: resumed, the
    // checkpoint's (batch_size rows on each of its ranks).
    const int trained_world = resumed && config_.data_parallel.elastic && resumed->world_size > 0 ? resumed->world_size : world;
    sampler_ = std::make_unique<BatchSampler>(load_data(config_.data, config_.model.vocab_size),
                                              config_.data.val_fraction, config_.batch_size * trained_world,
                                              config_.seq_len, config_.seed);
    shard();
    schedule_ = CosineSchedule{config_.peak_lr(), config_.final_lr(), config_.schedule.warmup_steps, config_.steps};
    const std::vector<std::string> recipes = config_.run_recipes();
    for (std::size_t i = 0; i < recipes.size(); ++i) {
        runs_.push_back(std::make_unique<Run>(config_, recipes[i], config_.run_seed(int(i)), backend_));
        sync_->attach(runs_.back()->model);
        runs_.back()->model.set_loss_rows(sampler_->global_rows());
    }
    if (!config_.init_from.empty() && !resumed) {  // every run, every rank: the same weights
        const CheckpointFiles files = open_checkpoint(config_.init_from);
        const std::vector<float> weights = load_pretrained(
            files, inspect_pretrained(files, config_.model.n_head), runs_.front()->model.param_tensors());
        for (const auto& run : runs_) run->model.params_from_host(weights);
    }
    if (resumed) restore(*resumed);
    take_snapshot();
    if (sync_->writes_checkpoints() && !config_.checkpoint.dir.empty()) {  // the checkpoints' host memory, now
        host_snapshot_ = backend_.make_host_snapshot();
        std::size_t bytes = 0;
        for (const auto& rep : runs_) bytes += 3 * rep->model.num_params() * sizeof(float);
        host_snapshot_->reserve(bytes);
    }
}

// The last good state: per run its parameters, then AdamW's m and v, in one buffer of
// backend memory reused from snapshot to snapshot; the rest (small) on the host.
struct Trainer::Snapshot {
    TrainState state;  // without parameters and moments
    std::vector<DeviceBuffer<float>> arrays;
};

Trainer::~Trainer() = default;

Model& Trainer::model(int run) { return runs_.at(static_cast<std::size_t>(run))->model; }
const Model& Trainer::model(int run) const { return runs_.at(static_cast<std::size_t>(run))->model; }

void Trainer::add_observer(TrainObserver* observer) { observers_.push_back(observer); }

void Trainer::remove_observer(TrainObserver* observer) {
    observers_.erase(std::remove(observers_.begin(), observers_.end(), observer), observers_.end());
}

void Trainer::set_capture_sink(int run, CaptureSink* sink) {
    runs_.at(static_cast<std::size_t>(run))->sink = sink;
    if (!sink) model(run).set_capture(nullptr, false);
}

// --- control requests -------------------------------------------------------------

void Trainer::pause() {
    std::lock_guard lock(mu_);
    requests_.push_back({Request::Pause, -1, {}});
    wake_.notify_all();
}

void Trainer::resume(std::string why) {
    std::lock_guard lock(mu_);
    requests_.push_back({Request::Resume, -1, std::move(why)});
    wake_.notify_all();
}

void Trainer::stop() {
    std::lock_guard lock(mu_);
    requests_.push_back({Request::Stop, -1, {}});
    wake_.notify_all();
}

void Trainer::switch_recipe(int run, const std::string& recipe) {
    if (run < 0 || run >= runs())
        throw std::invalid_argument("switch_recipe: no run " + std::to_string(run) + " (the run has " +
                                    std::to_string(runs()) + ")");
    config_.recipe_book().check(recipe);  // unknown names fail here, in the caller's thread
    std::lock_guard lock(mu_);
    requests_.push_back({Request::Switch, run, recipe});
    wake_.notify_all();
}

void Trainer::checkpoint_now(const std::string& path) {
    if (path.empty() && config_.checkpoint.dir.empty())
        throw std::invalid_argument("checkpoint_now: no path given and checkpoint.dir is not set");
    std::lock_guard lock(mu_);
    requests_.push_back({Request::Checkpoint, -1, path});
    wake_.notify_all();
}

void Trainer::set_capture_every(int every) {
    if (every < 0) throw std::invalid_argument("set_capture_every: negative interval " + std::to_string(every));
    std::lock_guard lock(mu_);
    requests_.push_back({Request::CaptureEvery, -1, {}, every});
    wake_.notify_all();
}

void Trainer::record_kernels(int steps) {
    if (steps < 1) throw std::invalid_argument("record_kernels: " + std::to_string(steps) + " steps, expected 1 or more");
    std::lock_guard lock(mu_);
    requests_.push_back({Request::KernelSteps, -1, {}, steps});
    wake_.notify_all();
}

void Trainer::emit(EventKind kind, int run, std::string detail) {
    TrainEvent e{kind, step_, run, std::move(detail)};
    for (auto* o : observers_) o->on_event(e);
}

std::deque<Trainer::Request> Trainer::take_requests() {
    std::deque<Request> local;
    std::lock_guard lock(mu_);
    local.swap(requests_);
    return local;
}

void Trainer::apply_requests() {
    for (const Request& r : sync_->requests_due(take_requests())) apply(r);
}

void Trainer::apply(const Request& r) {
        switch (r.kind) {
        case Request::Pause:
            if (!paused_) emit(EventKind::Pause, -1, "");
            paused_ = true;
            break;
        case Request::Resume:
            if (paused_) emit(EventKind::Resume, -1, r.text);
            paused_ = false;
            break;
        case Request::Stop:
            if (!stopping_) emit(EventKind::Stop, -1, "");
            stopping_ = true;
            break;
        case Request::Switch: {
            auto& rep = *runs_[static_cast<std::size_t>(r.run)];
            std::string from = rep.model.plan().name();
            rep.model.set_plan(config_.recipe_book().plan(r.text, rep.model.linears()));
            emit(EventKind::RecipeSwitch, r.run, from + " -> " + r.text);
            take_snapshot();  // a rewind must not undo the switch
            break;
        }
        case Request::CaptureEvery:
            config_.capture_every = r.value;
            emit(EventKind::CaptureInterval, -1, "every " + std::to_string(r.value) + " steps");
            break;
        case Request::KernelSteps:
            emit(EventKind::KernelTiming, -1,
                 "recording every kernel of steps " + std::to_string(step_ + 1) + " to " +
                     std::to_string(step_ + r.value) + " (asked live)");
            for (auto* o : observers_) o->on_kernel_request(r.value);
            break;
        case Request::Checkpoint: {
            if (sync_->writes_checkpoints()) write_checkpoint(r.text.empty() ? default_checkpoint_path() : r.text);
            break;
        }
        case Request::Admit:
            admit(r.text);
            break;
        }
}

// --- the job ---------------------------------------------------------------------

void Trainer::agree(double step_ms) {
    const StepAgreement agreed = sync_->agree(step_, step_ms, take_requests());
    for (const std::string& why : agreed.refused) emit(EventKind::Error, -1, why);
    for (const RankStepRecord& r : agreed.ranks)
        for (auto* o : observers_) o->on_rank_step(r);
    for (const std::string& finding : agreed.health) emit(EventKind::Health, -1, finding);
    for (const std::string& finding : agreed.scaling) emit(EventKind::ScalingMismatch, -1, finding);
    // The job's first NaN/Inf: the lowest step, then the lowest rank, once.
    const RankStepRecord* first = nullptr;
    for (const RankStepRecord& r : agreed.ranks)
        if (r.nonfinite_step > 0 && (!first || r.nonfinite_step < first->nonfinite_step)) first = &r;
    if (first && first_nonfinite_rank_ < 0) {
        first_nonfinite_rank_ = first->rank;
        emit(EventKind::FirstNonFinite, -1,
             "job: rank " + std::to_string(first->rank) + " held the first non-finite value, at step " +
                 std::to_string(first->nonfinite_step));
    }
}

// --- the loop ---------------------------------------------------------------------

TrainSummary Trainer::run() {
    // An elastic job goes on without a rank lost in `work`; false when it ends instead.
    auto elastic = [&](const auto& work) {
        if (!sync_->elastic()) return work(), true;
        const std::int64_t in_flight = step_ + 1;
        try {
            work();
        } catch (const std::logic_error&) {
            throw;  // a bug or bad input, not a lost rank
        } catch (const std::exception& fault) {
            return change_world(fault, in_flight);
        }
        return true;
    };
    for (;;) {
        if (paused_) {
            std::unique_lock lock(mu_);
            wake_.wait(lock, [&] { return !requests_.empty(); });
        }
        if (!elastic([&] { apply_requests(); })) break;  // ranks join there
        if (stopping_ || !error_.empty() || step_ >= config_.steps) break;
        if (paused_) continue;
        if (!elastic([&] { step(); })) break;
    }
    std::string last;
    // A run that gave up on a non-finite value says which checkpoint it did not write.
    if (sync_->writes_checkpoints() && !config_.checkpoint.dir.empty() && (error_.empty() || !unclean_.empty())) {
        last = default_checkpoint_path();
        if (!write_checkpoint(last)) last.clear();
    }
    checkpoints_.wait();
    for (const std::string& skipped : report_checkpoints())
        if (skipped == last) last.clear();
    if (!last.empty()) landing_check(last);
    return summary();
}

// One run's part of a step: forward, the loss checks, backward, the gradient norm and
// AdamW, ending where the loop of runs would return (a non-finite loss or norm, a spike).
// From a run's thread when the runs go at once: it touches only the run and the backend.
Trainer::RunStep Trainer::run_part(Run& rep, int r, float lr, bool capture, CaptureSink* sink) {
    using clock = std::chrono::steady_clock;
    RunStep part;
    const auto t0 = clock::now();
    sync_->begin_run();
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(delay_ms_));
    if (sink) rep.model.set_capture(sink, capture);
    rep.model.set_rounding(rep.seed, step_ + 1);
    const Batch& batch = batches_[std::size_t(r) % batches_.size()];
    const float own = rep.model.forward(batch.tokens.data(), batch.targets.data(), batch.B, batch.T);
    part.own_finite = std::isfinite(own);
    part.loss = sync_->loss(r, own);  // every rank decides on the same loss
    if (!std::isfinite(part.loss)) {
        part.stop = RunStep::Stop::Loss;
        return part;
    }
    if (config_.rewind.enabled && static_cast<int>(rep.recent_losses.size()) >= config_.rewind.window) {
        double mean = 0.0;
        for (float l : rep.recent_losses) mean += l;
        mean /= static_cast<double>(rep.recent_losses.size());
        if (part.loss > config_.rewind.spike_factor * mean) {
            part.stop = RunStep::Stop::Spike;
            part.spike_mean = mean;
            return part;
        }
    }
    rep.model.backward();
    sync_->finish_backward(rep.model);
    const std::int64_t n = std::int64_t(rep.model.num_params());
    {
        OpTimer timer(sink, backend_, "optimizer", -1);
        rep.model.nonfinite().stage();  // lands with the norm's read back
        part.norm = backend_.grad_norm(rep.model.grads().data(), n);
        if (std::isfinite(part.norm))
            rep.adam->step(rep.model.params(), rep.model.grads(), lr, clip_factor(part.norm, config_.optimizer.grad_clip));
    }
    part.found = rep.model.nonfinite().poll();
    if (!std::isfinite(part.norm)) part.stop = RunStep::Stop::GradNorm;
    part.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    return part;
}

namespace {

// A run's step (6 x parameters x tokens FLOPs) above which one run fills a GPU by itself: an
// H200's ~700 TFLOP/s take ~1.5 ms for it, about what the ~300 launches and host waits of
// a small model's step take. Past it lanes gain little and cost their scratch memory.
constexpr double kLaneStepFlops = 1e12;

}  // namespace

// At once only where it changes nothing but the interleaving: a backend with lanes, more
// than one run, a job of one process (a data-parallel step's collectives go in run order),
// no operand capture (its tensors are handed over during the step), and runs small enough
// to leave the device waiting on the host (kLaneStepFlops).
bool Trainer::runs_together(bool capture) const {
    if (!config_.concurrent_runs || runs_.size() < 2 || backend_.max_lanes() < 2 || sync_ != &single_ || capture)
        return false;
    const double tokens = double(config_.batch_size) * config_.seq_len;
    return 6.0 * double(runs_.front()->model.num_params()) * tokens <= kLaneStepFlops;
}

// Every run's part at once: one lane and one thread per group of runs (lane t takes runs
// t, t + lanes, ... in order), each run's sink calls held for the training thread.
void Trainer::run_together(std::vector<RunStep>& parts, float lr) {
    const int lanes = std::min({int(runs_.size()), backend_.max_lanes(), std::max(2, default_threads())});
    if (!pool_ || pool_->size() != lanes) pool_ = std::make_unique<ThreadPool>(lanes);
    backend_.open_lanes(lanes);
    pool_->run(lanes, [&](std::int64_t lane) {
        std::exception_ptr entered;
        try {
            backend_.enter_lane(int(lane));
        } catch (...) {
            entered = std::current_exception();
        }
        for (std::size_t i = std::size_t(lane); i < runs_.size(); i += std::size_t(lanes)) {
            Run& rep = *runs_[i];
            try {
                if (entered) std::rethrow_exception(entered);
                parts[i] = run_part(rep, int(i), lr, false, rep.sink ? &rep.held : nullptr);
            } catch (...) {
                parts[i].error = std::current_exception();
            }
        }
        if (!entered) backend_.leave_lane();
    });
    backend_.close_lanes();
}

bool Trainer::step() {
    apply_requests();
    report_checkpoints();
    // A pause that arrived since run() looked holds this step too: no step follows the
    // Pause event.
    if (paused_ || stopping_ || !error_.empty() || step_ >= config_.steps) return false;
    using clock = std::chrono::steady_clock;

    std::uint64_t b = next_batch_;
    while (skipped_.count(b)) ++b;
    // A batch per seed: run i trains on batches_[i % seeds], the batch of its seed.
    batches_.resize(std::size_t(config_.seeds));
    for (int k = 0; k < config_.seeds; ++k) sampler_->train_batch(b, config_.run_seed(k), batches_[std::size_t(k)]);
    const float lr = schedule_.at(static_cast<int>(step_));
    const bool capture = config_.capture_every > 0 && step_ % config_.capture_every == 0;
    for (auto* o : observers_) o->on_step_begin(step_ + 1, capture);
    // Injections that start or end with this step, marked at it: where their figures change.
    for (const InjectionEvent& e : injection_events(config_.inject, step_ + 1))
        for (auto* o : observers_) o->on_event({EventKind::Injection, step_ + 1, -1, e.detail});
    if (auto fault = corruptions_.find(b); fault != corruptions_.end()) {
        for (auto& rep : runs_)
            backend_.scale(rep->model.params().data(), fault->second, std::int64_t(rep->model.num_params()));
        corruptions_.erase(fault);
    }

    const auto step_start = clock::now();
    sync_->begin_step(step_ + 1);
    // The runs' parts: at once, each in a lane of the backend, or one after another; either
    // way settled here in run order, as the runs would be one after another.
    std::vector<RunStep> parts(runs_.size());
    const bool together = runs_together(capture);
    std::vector<NonFiniteWatch::Mark> watched;
    if (together) {
        for (auto& rep : runs_) watched.push_back(rep->model.nonfinite().mark());
        run_together(parts, lr);
    }
    // A step given up at run `at`: the runs after it are never settled, and what went at
    // once leaves nothing behind that the rewind does not restore (their sinks' calls, the
    // non-finite values they met), as if they had not run.
    auto give_up = [&](std::size_t at, bool result) {
        for (std::size_t j = at + 1; together && j < runs_.size(); ++j) {
            Run& later = *runs_[j];
            later.held.clear();
            if (later.sink) later.model.set_capture(later.sink, capture);
            later.model.nonfinite().back_to(watched[j]);
        }
        return result;
    };
    std::vector<StepRecord> records;
    for (std::size_t i = 0; i < runs_.size(); ++i) {
        Run& rep = *runs_[i];
        const int r = static_cast<int>(i);
        if (together) {
            if (rep.sink) {
                rep.held.replay(*rep.sink);
                rep.model.set_capture(rep.sink, capture);
            }
        } else {
            parts[i] = run_part(rep, r, lr, capture, rep.sink);
        }
        RunStep& part = parts[i];
        if (part.error) {
            give_up(i, false);
            std::rethrow_exception(part.error);
        }
        switch (part.stop) {
            case RunStep::Stop::Loss:
                // A rank whose own loss was finite held none of it: the ranks that did report theirs.
                if (!part.own_finite) find_nonfinite(rep, r, NonFiniteRecord::Source::Loss);
                return give_up(i, recover(b, EventKind::NonFinite, r,
                                       "loss " + std::to_string(part.loss) + " on batch " + std::to_string(b)));
            case RunStep::Stop::Spike:
                return give_up(i, recover(b, EventKind::LossSpike, r,
                                       "loss " + std::to_string(part.loss) + " over moving average " +
                                           std::to_string(part.spike_mean)));
            case RunStep::Stop::GradNorm:
            case RunStep::Stop::None: break;
        }
        if (part.found) report_nonfinite(rep, r, std::move(*part.found));
        if (part.stop == RunStep::Stop::GradNorm) {
            // The norm of a job's summed gradients is every rank's: only a job of one can say
            // the gradients themselves held the first one.
            if (sync_->world_size() == 1) find_nonfinite(rep, r, NonFiniteRecord::Source::Gradient);
            return give_up(i, recover(b, EventKind::NonFinite, r,
                                   "gradient norm " + std::to_string(part.norm) + " on batch " + std::to_string(b)));
        }
        const Batch& batch = batches_[i % batches_.size()];
        StepRecord rec;
        rec.run = r;
        rec.recipe = rep.model.plan().name();
        rec.batch = b;
        rec.loss = part.loss;
        rec.lr = lr;
        rec.grad_norm = part.norm;
        rec.step_time_s = part.seconds;
        const int world = sync_->world_size();  // tokens of every rank
        rec.tokens_per_s = part.seconds > 0 ? double(batch.B) * batch.T * world / part.seconds : 0.0;
        records.push_back(std::move(rec));
    }

    const double step_ms = std::chrono::duration<double, std::milli>(clock::now() - step_start).count();
    ++step_;
    next_batch_ = b + 1;
    for (std::size_t i = 0; i < runs_.size(); ++i) {
        Run& rep = *runs_[i];
        rep.last_loss = records[i].loss;
        rep.recent_losses.push_back(records[i].loss);
        while (static_cast<int>(rep.recent_losses.size()) > config_.rewind.window) rep.recent_losses.pop_front();
    }
    bool eval_now = step_ == config_.steps || (config_.eval.every > 0 && step_ % config_.eval.every == 0);
    if (eval_now) {
        std::vector<float> eval = evaluate();
        for (std::size_t i = 0; i < runs_.size(); ++i) {
            runs_[i]->last_eval = eval[i];
            records[i].eval_loss = eval[i];
        }
    }
    for (auto& rec : records) {
        rec.step = step_;
        for (auto* o : observers_) o->on_step(rec);
    }
    agree(step_ms);
    if (step_ % config_.rewind.snapshot_every == 0) take_snapshot();  // a no-op with rewind off
    if (sync_->writes_checkpoints() && !config_.checkpoint.dir.empty() && config_.checkpoint.every > 0 &&
        step_ % config_.checkpoint.every == 0 && step_ < config_.steps)
        write_checkpoint(default_checkpoint_path());
    return true;
}

std::vector<float> Trainer::evaluate() {
    std::vector<float> out;
    for (auto& rep : runs_) {
        double sum = 0.0;
        // One op per run: its kernels are the run's evaluation, not the step's.
        OpTimer timer(rep->sink, backend_, "eval", -1);
        for (const Batch& b : eval_batches_)
            sum += rep->model.evaluate(b.tokens.data(), b.targets.data(), b.B, b.T);
        out.push_back(static_cast<float>(sum / static_cast<double>(eval_batches_.size())));
    }
    // Each rank evaluated its rows of the held-out batches.
    const std::vector<double> mean = sync_->mean(std::vector<double>(out.begin(), out.end()));
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(mean[i]);
    return out;
}

// --- recovery ---------------------------------------------------------------------

bool Trainer::recover(std::uint64_t batch, EventKind why, int run, const std::string& detail) {
    emit(why, run, detail);
    // Kept unless a rewind restores the last good state.
    if (why == EventKind::NonFinite) unclean_ = "step " + std::to_string(step_ + 1) + " held a non-finite " + detail;
    if (!config_.rewind.enabled) {
        if (why == EventKind::NonFinite) {
            error_ = "non-finite " + detail + " at step " + std::to_string(step_ + 1) + " (rewind disabled)";
            emit(EventKind::Error, run, error_);
        }
        return true;
    }
    if (rewinds_ >= config_.rewind.max_rewinds) {
        error_ = "gave up after " + std::to_string(rewinds_) + " rewinds (rewind.max_rewinds); last: " + detail;
        emit(EventKind::Error, run, error_);
        return true;
    }
    std::set<std::uint64_t> skipped = skipped_;
    skipped.insert(batch);
    std::int64_t rewinds = rewinds_ + 1;
    apply_state(snapshot_->state, snapshot_.get());
    unclean_.clear();
    skipped_ = std::move(skipped);  // skips outlive the rewind, or the same batch comes back
    rewinds_ = rewinds;
    emit(EventKind::Rewind, run,
         "to step " + std::to_string(step_) + ", skipping batch " + std::to_string(batch));
    return true;
}

// --- non-finite values ----------------------------------------------------------------

void Trainer::find_nonfinite(Run& rep, int run, NonFiniteRecord::Source source) {
    if (rep.nonfinite_reported) return;
    std::optional<NonFiniteRecord> found = rep.model.nonfinite().read_now();
    if (!found) {
        found.emplace();
        found->source = source;
        found->step = step_ + 1;
    }
    report_nonfinite(rep, run, std::move(*found));
}

void Trainer::report_nonfinite(Run& rep, int run, NonFiniteRecord record) {
    if (rep.nonfinite_reported) return;
    rep.nonfinite_reported = true;
    record.run = run;
    record.rank = sync_->rank();
    sync_->hold_nonfinite(record.step);
    if (!first_nonfinite_ || record.step < first_nonfinite_->step) first_nonfinite_ = record;
    emit(EventKind::FirstNonFinite, run, record.describe());
}

namespace {

// "run 0's parameters: a NaN/Inf (first at 1234)"; empty when all are finite.
std::string nonfinite_in(const std::vector<float>& values, const std::string& what) {
    for (std::size_t i = 0; i < values.size(); ++i)
        if (!std::isfinite(values[i])) return what + ": a NaN/Inf (first at " + std::to_string(i) + ")";
    return {};
}

}  // namespace

std::string Trainer::nonfinite_state(const TrainState* s) const {
    if (!unclean_.empty()) return unclean_;
    if (s) {
        std::vector<RunArrays> arrays;
        for (const RunState& r : s->runs) arrays.push_back({r.params, r.m, r.v});
        if (std::string why = nonfinite_arrays(arrays); !why.empty()) return why;
    }
    for (std::size_t i = 0; i < runs_.size(); ++i) {
        const Run& rep = *runs_[i];
        const std::string run = "run " + std::to_string(i) + "'s ";
        // Delayed scaling's histories are read back only where a NaN/Inf may have reached them.
        if (!s && !rep.nonfinite_reported) continue;
        for (int l = 0; l < int(rep.model.linears().size()); ++l)
            for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                const std::optional<DelayedState> d = rep.model.delayed_state(l, o);
                if (!d) continue;
                std::vector<float> values(d->history().begin(), d->history().end());
                values.push_back(d->scale());
                if (std::string why = nonfinite_in(values, run + "delayed scaling state of " +
                                                               rep.model.linears()[std::size_t(l)].name + " " +
                                                               std::string(operand_name(o)));
                    !why.empty())
                    return why;
            }
    }
    return {};
}

// --- an elastic job's lost rank -------------------------------------------------------

void Trainer::shard() {
    sampler_->set_shard(sync_->rank(), sync_->world_size());
    sync_->set_batch_rows(sampler_->global_rows());
    eval_batches_.resize(static_cast<std::size_t>(config_.eval.batches));
    for (int i = 0; i < config_.eval.batches; ++i) sampler_->eval_batch(i, config_.eval.batches, eval_batches_[i]);
}

bool Trainer::change_world(const std::exception& fault, std::int64_t in_flight) {
    std::vector<std::int64_t> held;
    for (const auto* s : {previous_.get(), snapshot_.get()})
        if (s) held.push_back(s->state.step);
    std::optional<WorldChange> change;
    try {
        change = sync_->change_world(fault, in_flight, held);
        if (previous_ && previous_->state.step == change->restore_step) std::swap(previous_, snapshot_);
        if (!snapshot_ || snapshot_->state.step != change->restore_step)
            throw std::runtime_error("this rank holds no snapshot of step " + std::to_string(change->restore_step));
        previous_.reset();  // a later snapshot is of the world that was lost
        apply_state(snapshot_->state, snapshot_.get());
        unclean_.clear();
        shard();
    } catch (const std::exception& e) {
        // A second failure, or none that losing a rank explains: the job ends from a good
        // state, which rank 0 writes as a checkpoint.
        if (snapshot_) apply_state(snapshot_->state, snapshot_.get());
        unclean_.clear();
        error_ = std::string("lost a rank (") + fault.what() + ") and could not go on: " + e.what();
        emit(EventKind::Error, -1, error_);
        if (sync_->writes_checkpoints() && !config_.checkpoint.dir.empty()) write_checkpoint(default_checkpoint_path());
        return false;
    }
    std::string lost;
    for (int r : change->lost) lost += (lost.empty() ? "" : ",") + std::to_string(r);
    const std::int64_t steps_lost = change->failed_step - change->restore_step;
    emit(EventKind::WorldChanged, -1,
         "lost rank " + lost + "; world " + std::to_string(change->old_world) + " -> " +
             std::to_string(change->new_world) + "; failed in step " + std::to_string(change->failed_step) +
             ", restored step " + std::to_string(change->restore_step) + " (" + std::to_string(steps_lost) +
             " steps lost); " + change->why);
    return true;
}

void Trainer::admit(const std::string& ranks) {
    const WorldJoin join = sync_->admit(parse_ranks(ranks), [this] {
        const std::vector<std::uint8_t> bytes = serialize_checkpoint(state(true));
        return std::string(bytes.begin(), bytes.end());
    });
    const std::string world = "world " + std::to_string(join.old_world) + " -> " + std::to_string(join.new_world);
    for (const auto& [rank, why] : join.failed)
        emit(EventKind::Health, -1,
             "rank " + std::to_string(rank) + " could not join at step " + std::to_string(step_) + " (" + why +
                 "); the job goes on with " + std::to_string(join.old_world) + " rank(s) as it was");
    if (join.joined.empty()) return;
    // Every rank goes on from the same snapshot of this step, as the joiners do from the state
    // (Trainer's constructor takes one), and as a job resumed from its checkpoint would.
    previous_.reset();
    take_snapshot();
    if (snapshot_ && snapshot_->state.step == step_) apply_state(snapshot_->state, snapshot_.get());
    unclean_.clear();
    shard();
    std::string joined;
    for (int r : join.joined) joined += (joined.empty() ? "" : ",") + std::to_string(r);
    emit(EventKind::WorldChanged, -1, "rank " + joined + " joined; " + world + " at step " + std::to_string(step_));
}

void Trainer::take_snapshot() {
    if (!config_.rewind.enabled) return;
    // A rewind must find a good state: the last one stays when this one holds a NaN/Inf.
    if (const std::string why = nonfinite_state(nullptr); !why.empty()) {
        emit(EventKind::Health, -1, "snapshot at step " + std::to_string(step_) + " not taken: " + why);
        return;
    }
    // An elastic job keeps the one before too: a rank lost at a snapshot step may leave
    // some survivors with the new one and some without it.
    if (sync_->elastic() && snapshot_ && snapshot_->state.step != step_) std::swap(previous_, snapshot_);
    if (!snapshot_) snapshot_ = std::make_unique<Snapshot>();
    snapshot_->state = state(false);
    snapshot_->arrays.resize(runs_.size());
    for (std::size_t i = 0; i < runs_.size(); ++i) {
        Run& rep = *runs_[i];
        const std::size_t n = rep.model.num_params();
        DeviceBuffer<float>& a = snapshot_->arrays[i];
        if (a.size() < 3 * n) a = DeviceBuffer<float>(backend_, 3 * n);
        backend_.copy(a.data(), rep.model.params().data(), n * sizeof(float));
        rep.adam->copy_moments_to(a.data() + n, a.data() + 2 * n);
    }
}

void Trainer::corrupt_params_at_batch(std::uint64_t batch, float factor) { corruptions_[batch] = factor; }
void Trainer::skip_batch(std::uint64_t batch) { skipped_.insert(batch); }

// --- state --------------------------------------------------------------------------

TrainState Trainer::state() const { return state(true); }

TrainState Trainer::state(bool with_arrays) const {
    TrainState s;
    s.config_json = train_config_to_json(config_);
    s.step = step_;
    s.next_batch = next_batch_;
    s.skipped_batches.assign(skipped_.begin(), skipped_.end());
    s.rewinds = rewinds_;
    // The ranks whose batch_size rows make the global batch: the ranks now, unless an
    // elastic job lost some and kept the global batch.
    s.world_size = sampler_->global_rows() / config_.batch_size;
    for (const auto& rep : runs_) {
        RunState r;
        r.recipe = rep->model.plan().name();
        if (with_arrays) {
            r.params = rep->model.params_to_host();
            r.m = rep->adam->m_to_host();
            r.v = rep->adam->v_to_host();
        }
        r.adam_steps = rep->adam->steps_taken();
        r.recipe_state = rep->model.save_recipe_state();
        r.recent_losses.assign(rep->recent_losses.begin(), rep->recent_losses.end());
        s.runs.push_back(std::move(r));
    }
    return s;
}

void Trainer::restore(const TrainState& s) {
    if (s.runs.size() != runs_.size())
        throw std::invalid_argument("checkpoint has " + std::to_string(s.runs.size()) + " runs, the run " +
                                    std::to_string(runs_.size()));
    for (std::size_t i = 0; i < runs_.size(); ++i)
        if (s.runs[i].params.size() != runs_[i]->model.num_params())
            throw std::invalid_argument("checkpoint run " + std::to_string(i) + " has " +
                                        std::to_string(s.runs[i].params.size()) + " parameters, the model " +
                                        std::to_string(runs_[i]->model.num_params()) +
                                        " (a different model config)");
    apply_state(s, nullptr);
    unclean_.clear();
}

void Trainer::apply_state(const TrainState& s, const Snapshot* arrays) {
    for (std::size_t i = 0; i < runs_.size(); ++i) {
        Run& rep = *runs_[i];
        const RunState& r = s.runs[i];
        rep.model.set_plan(config_.recipe_book().plan(r.recipe, rep.model.linears()));
        rep.model.load_recipe_state(r.recipe_state);
        if (arrays) {
            const std::size_t n = rep.model.num_params();
            const float* a = arrays->arrays[i].data();
            backend_.copy(rep.model.params().data(), a, n * sizeof(float));
            rep.adam->copy_moments_from(a + n, a + 2 * n, r.adam_steps);
        } else {
            rep.model.params_from_host(r.params);
            rep.adam->set_state(r.m, r.v, r.adam_steps);
        }
        rep.recent_losses.assign(r.recent_losses.begin(), r.recent_losses.end());
        rep.last_loss = r.recent_losses.empty() ? std::numeric_limits<float>::quiet_NaN() : r.recent_losses.back();
    }
    step_ = s.step;
    next_batch_ = s.next_batch;
    skipped_ = std::set<std::uint64_t>(s.skipped_batches.begin(), s.skipped_batches.end());
    rewinds_ = s.rewinds;
}

void Trainer::save_checkpoint(const std::string& path) const { fp8scope::save_checkpoint(path, state()); }

// The state's small part is read now; the parameters and moments are copied to the host
// behind the steps that follow (HostSnapshot) and written by the writer thread.
bool Trainer::write_checkpoint(std::string path) {
    TrainState s = state(false);
    if (const std::string why = nonfinite_state(&s); !why.empty()) {
        emit(EventKind::CheckpointSkipped, -1, path + " not written: " + why);
        return false;
    }
    checkpoints_.wait();  // the host copy is the last write's until it is written
    if (!host_snapshot_) host_snapshot_ = backend_.make_host_snapshot();
    std::vector<HostSnapshot::Region> regions;
    std::vector<std::size_t> sizes;
    for (const auto& rep : runs_) {
        const std::size_t n = rep->model.num_params();
        regions.push_back({rep->model.params().data(), n * sizeof(float)});
        regions.push_back({rep->adam->m_data(), n * sizeof(float)});
        regions.push_back({rep->adam->v_data(), n * sizeof(float)});
        sizes.push_back(n);
    }
    host_snapshot_->start(regions);
    checkpoints_.write(std::move(path), std::move(s), *host_snapshot_, std::move(sizes));
    return true;
}

std::string Trainer::checkpoint_route() const { return host_snapshot_ ? host_snapshot_->route() : std::string(); }

std::vector<std::string> Trainer::report_checkpoints() {
    std::vector<std::string> skipped;
    for (const CheckpointWriter::Done& d : checkpoints_.finished()) {
        if (!d.skipped.empty()) {
            emit(EventKind::CheckpointSkipped, -1, d.path + " not written: " + d.skipped);
            skipped.push_back(d.path);
        } else if (d.error.empty()) {
            checkpoint_timing_ = d.timing();
            emit(EventKind::Checkpoint, -1, d.path);
        } else {
            fail_checkpoint("checkpoint " + d.path + ": " + d.error);
        }
    }
    return skipped;
}

// The landing check of a run: the last checkpoint must give back what was trained, bit for
// bit (its checksum is verified on the way), and the final eval loss goes on record.
void Trainer::landing_check(const std::string& path) {
    std::string verdict;
    try {
        const TrainState back = load_checkpoint(path), now = state();
        verdict = back.step == now.step ? "" : "step " + std::to_string(back.step) + " instead of " + std::to_string(now.step);
        for (std::size_t i = 0; verdict.empty() && i < now.runs.size(); ++i) {
            const RunState &a = back.runs.at(i), &b = now.runs[i];
            if (a.params != b.params || a.m != b.m || a.v != b.v || a.recipe_state != b.recipe_state)
                verdict = "run " + std::to_string(i) + "'s parameters, moments or scaling state differ from the trained ones";
        }
    } catch (const std::exception& e) {
        verdict = e.what();
    }
    std::string detail = "landing: " + path + (verdict.empty() ? " reads back intact (checksum; parameters, moments and "
                                                                 "scaling state bit for bit)"
                                                               : " is not the trained state: " + verdict);
    const Run& first = *runs_.front();
    if (first.last_eval) detail += "; final eval loss " + std::to_string(*first.last_eval);
    emit(EventKind::Health, -1, detail);
    if (!verdict.empty()) fail_checkpoint(detail);
}

void Trainer::fail_checkpoint(const std::string& why) {
    emit(EventKind::Error, -1, why);
    if (checkpoint_error_.empty()) checkpoint_error_ = why;
}

std::string Trainer::default_checkpoint_path() const {
    return (std::filesystem::path(config_.checkpoint.dir) / ("step_" + std::to_string(step_) + ".ckpt")).string();
}

TrainSummary Trainer::summary() const {
    TrainSummary s;
    s.first_nonfinite = first_nonfinite_;
    s.first_nonfinite_rank = first_nonfinite_rank_;
    s.steps = step_;
    s.rewinds = rewinds_;
    s.stopped = stopping_ && step_ < config_.steps;
    s.error = error_.empty() ? checkpoint_error_ : error_;
    for (const auto& rep : runs_)
        s.runs.push_back({rep->model.plan().name(), rep->last_loss, rep->last_eval});
    return s;
}

}  // namespace fp8scope
