// TrainRecorder: trainer records to trace records, names to ids.
#include "train_recorder.h"
#include "util/host_name.h"

#include <unistd.h>

#include <algorithm>
#include <ctime>

namespace fp8scope::trace {

namespace {

// Every linear x GEMM of one run's plan.
void add_precision(TraceMeta& m, int run, const PrecisionPlan& plan) {
    auto name = [](const Recipe* q) { return q ? recipe_name(*q) : std::string(); };
    for (std::size_t l = 0; l < m.linears.size(); ++l)
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) {
            const auto [a, b] = gemm_operands(g);
            const TrainingRecipe& r = plan.recipe(int(l), g);
            m.precision.push_back({run, std::int32_t(l), g, r.name, name(plan.quantizer(int(l), g, a)),
                                   name(plan.quantizer(int(l), g, b)), &r != &plan.base()});
        }
}

}  // namespace

TraceMeta make_trace_meta(const TrainConfig& config, const std::vector<LinearInfo>& linears,
                          const std::string& tool_version, std::int64_t blockmap_every,
                          const std::vector<Recipe>& analysis, const LaunchEnv& job) {
    TraceMeta m;
    m.tool_version = tool_version;
    m.config_json = train_config_to_json(config);
    for (const auto& r : config.run_recipes()) m.runs.push_back({r, r});
    m.linears = linears;
    const RecipeBook book = config.recipe_book();
    m.training_recipes = book.names();
    const auto recipes = config.run_recipes();
    for (std::size_t r = 0; r < recipes.size(); ++r) add_precision(m, int(r), book.plan(recipes[r], linears));
    // Every quantizer a run casts with has an id: the named recipes' and the runs' plans'
    // (a recipe's options and overrides), each also as its rowwise copy is cast.
    m.quantizers = trace_recipe_names(analysis);
    for (const GemmPrecision& p : m.precision)
        for (const std::string& q : {p.a, p.b}) {
            if (q.empty()) continue;
            for (const std::string& n : {q, recipe_name(rowwise_quantizer(parse_recipe(q)))})
                if (std::find(m.quantizers.begin(), m.quantizers.end(), n) == m.quantizers.end()) m.quantizers.push_back(n);
        }
    m.ops = default_op_names();
    m.capture_every = config.capture_every;
    m.blockmap_every = blockmap_every >= 0 ? blockmap_every : 10LL * config.capture_every;
    m.rank = job.rank;
    m.world_size = job.world_size;
    m.baseline_run = baseline_by_recipe(m.runs);
    for (std::size_t e = 0; e < config.inject.size(); ++e) {
        const Injection& in = config.inject[e];
        for (std::int64_t index : in.indices)
            m.injections.push_back({std::int32_t(e), in.step, in.until.value_or(-1), in.layer.value_or(-1), in.linear,
                                    in.operand, in.rows, index, in.scale});
    }
    return m;
}

namespace {

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

}  // namespace

std::string run_name(const TrainConfig& config, int run) {
    const std::vector<std::string> recipes = config.compare.empty() ? std::vector<std::string>{config.recipe}
                                                                    : config.compare;
    const std::size_t i = std::size_t(run / config.seeds);  // its place in the comparison
    const bool repeated = std::count(recipes.begin(), recipes.end(), recipes.at(i)) > 1;
    std::string name = repeated ? recipes[i] + "#" + std::to_string(i) : recipes[i];
    if (config.seeds > 1) name += " s" + std::to_string(config.run_seed(run));
    return name;
}

TraceMeta run_trace_meta(const TrainConfig& config, const Trainer& trainer, const std::string& tool_version,
                         std::int64_t blockmap_every, const LaunchEnv& job) {
    TraceMeta m = make_trace_meta(config, trainer.model(0).linears(), tool_version, blockmap_every,
                                  what_if_recipes(), job);
    m.created = utc_now();
    m.machine = host_name() + " (" + trainer.backend().describe() + ")";
    if (const std::optional<DType> sums = trainer.step_sync().grad_dtype()) m.grad_dtype = dtype_name(*sums);
    m.runs.clear();
    const auto recipes = config.run_recipes();
    for (std::size_t i = 0; i < recipes.size(); ++i) m.runs.push_back({run_name(config, int(i)), recipes[i]});
    return m;
}

void set_kernel_policy(TraceMeta& meta, const KernelPolicy& policy, Device device) {
    const bool on = policy.mode != KernelPolicy::Off && device != Device::CPU;
    meta.kernel_timings = on ? policy.name() : "off";
    meta.kernel_window = on && policy.mode != KernelPolicy::All ? policy.window : 0;
}

bool marks_kernel_window(EventKind kind) {
    switch (kind) {
    case EventKind::Rewind:
    case EventKind::NonFinite:
    case EventKind::LossSpike:
    case EventKind::Health:
    case EventKind::FirstNonFinite: return true;
    default: return false;
    }
}

TrainRecorder::TrainRecorder(const TraceMeta& meta, RecordSink& sink, StatsCaptureOptions options, KernelPolicy kernels)
    : meta_(meta), sink_(sink), ops_(meta.ops), kernels_(sink, ops_, kernels), policy_(kernels) {
    for (std::size_t i = 0; i < meta.runs.size(); ++i)
        captures_.push_back(std::make_unique<StatsCapture>(static_cast<int>(i), meta, sink, ops_, options));
}

TrainRecorder::~TrainRecorder() {
    if (traced_) traced_->trace_kernels(nullptr);  // no callbacks into a destroyed recorder
}

void TrainRecorder::event(EventKind kind, std::string detail) {
    on_event(TrainEvent{kind, step_, -1, std::move(detail)});  // as the trainer's own events
}

void TrainRecorder::trace_kernels(Backend& backend) {
    const std::string why_not = backend.trace_kernels(&kernels_);
    if (!why_not.empty()) {
        event(EventKind::KernelTiming, "off: " + why_not);
        return;
    }
    traced_ = &backend;
    for (auto& c : captures_) c->set_kernel_recorder(&kernels_);
    std::string kept = "records of every step";
    if (policy_.mode == KernelPolicy::Capture)
        kept = "records of capture steps and of " + std::to_string(policy_.window) + " steps around events";
    else if (policy_.mode == KernelPolicy::Every)
        kept = "records every " + std::to_string(policy_.every) + " steps and of " + std::to_string(policy_.window) +
               " steps around events";
    event(EventKind::KernelTiming, "on: every kernel, copy and memset of " + std::string(device_name(backend.device())) +
                                       ": sums every step, " + kept);
}

void TrainRecorder::stop_kernels() {
    if (!traced_) return;
    traced_->flush_kernels();
    kernels_.flush();
    const std::int64_t dropped = traced_->dropped_kernel_records();
    traced_->trace_kernels(nullptr);
    traced_ = nullptr;
    for (auto& c : captures_) c->set_kernel_recorder(nullptr);
    event(EventKind::KernelTiming, "off: " + std::to_string(kernels_.summed()) + " timed, " +
                                       std::to_string(kernels_.recorded()) + " records kept, " +
                                       std::to_string(dropped) + " dropped by the tracer");
}

CaptureSink* TrainRecorder::sink(int run) { return captures_.at(static_cast<std::size_t>(run)).get(); }

void TrainRecorder::on_step_begin(std::int64_t step, bool capture) {
    step_ = step;
    // Capture steps are 1, 1 + capture_every, ...; block maps on every blockmap_every-th step of those.
    bool maps = capture && meta_.blockmap_every > 0 && (step - 1) % meta_.blockmap_every == 0;
    for (auto& c : captures_) c->begin_step(step, capture, maps);
    kernels_.begin_step(step, capture);
}

void TrainRecorder::on_step(const fp8scope::StepRecord& r) {
    StepRecord s;
    s.run = r.run;
    s.step = r.step;
    s.loss = r.loss;
    s.eval_loss = r.eval_loss ? static_cast<double>(*r.eval_loss) : kNone;
    s.lr = r.lr;
    s.grad_norm = r.grad_norm;
    s.step_ms = r.step_time_s * 1e3;
    s.tokens_per_s = r.tokens_per_s;
    auto it = std::find(meta_.training_recipes.begin(), meta_.training_recipes.end(), r.recipe);
    s.recipe = it == meta_.training_recipes.end() ? -1 : static_cast<std::int32_t>(it - meta_.training_recipes.begin());
    sink_.write(s);
    if (r.run >= 0 && r.run < static_cast<int>(captures_.size())) captures_[r.run]->end_step();
    // After the last run's step: its kernels stream like the host records.
    if (traced_ && r.run + 1 == static_cast<int>(captures_.size())) traced_->flush_kernels();
}

void TrainRecorder::on_event(const TrainEvent& e) {
    int run = e.run >= 0 && e.run < static_cast<int>(meta_.runs.size()) ? e.run : -1;
    std::string detail = e.detail.substr(0, std::size_t(kEventDetailChars));  // the trace's column
    sink_.write(EventRecord{run, e.step, e.kind, std::move(detail)});
    if (marks_kernel_window(e.kind)) kernels_.mark_event();
}

void TrainRecorder::on_kernel_request(std::int64_t steps) { kernels_.request(steps); }

void TrainRecorder::on_rank_step(const fp8scope::RankStepRecord& r) {
    sink_.write(RankStepRecord{r.step, r.rank, r.compute_ms, r.comm_ms, r.step_ms, r.loss, r.grad_bytes, r.grad_error,
                               r.grad_snr_db, r.grad_underflow_pct, r.grad_overflow_pct});
}

}  // namespace fp8scope::trace
