// The engine's side of the live stream (see live_train.h).
#include "live_train.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <ctime>
#include <random>
#include <stdexcept>

#include "train_recorder.h"
#include "version.h"

namespace fp8scope::cli {
namespace {

std::string utc_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string host_name() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
    return std::string(buf) + " (CPU)";
}

int index_of(const std::vector<std::string>& names, const std::string& name) {
    auto it = std::find(names.begin(), names.end(), name);
    return it == names.end() ? -1 : static_cast<int>(it - names.begin());
}

// Training events as the trace names them; nullopt for those it has no kind for.
std::optional<trace::EventKind> trace_kind(EventKind k) {
    switch (k) {
    case EventKind::Pause: return trace::EventKind::Pause;
    case EventKind::Resume: return trace::EventKind::Resume;
    case EventKind::Stop: return trace::EventKind::Stop;
    case EventKind::RecipeSwitch: return trace::EventKind::RecipeSwitch;
    case EventKind::Checkpoint: return trace::EventKind::Checkpoint;
    case EventKind::NonFinite: return trace::EventKind::NonFinite;
    case EventKind::LossSpike: return trace::EventKind::LossSpike;
    case EventKind::Rewind: return trace::EventKind::Rewind;
    case EventKind::CaptureInterval: return trace::EventKind::CaptureInterval;
    case EventKind::Error: return std::nullopt;
    }
    return std::nullopt;
}

trace::EventRecord event_record(std::int32_t run, std::int64_t step, trace::EventKind kind, std::string detail) {
    if (detail.size() > static_cast<std::size_t>(trace::kEventDetailChars)) detail.resize(trace::kEventDetailChars);
    return {run, step, kind, std::move(detail)};
}

}  // namespace

trace::TraceMeta run_trace_meta(const TrainConfig& config, Trainer& trainer, std::int64_t blockmap_every) {
    trace::TraceMeta m = trace::make_trace_meta(config, trainer.model(0).linears(), kEngineVersion, blockmap_every);
    m.created = utc_now();
    m.machine = host_name();
    m.runs.clear();
    const auto recipes = config.run_recipes();
    for (std::size_t i = 0; i < recipes.size(); ++i) {
        // Runs are named by recipe; a repeated recipe gets its run index.
        bool repeated = std::count(recipes.begin(), recipes.end(), recipes[i]) > 1;
        m.runs.push_back({repeated ? recipes[i] + "#" + std::to_string(i) : recipes[i], recipes[i]});
    }
    return m;
}

live::CommandReply apply_command(Trainer& trainer, const live::Command& c) {
    using live::CommandKind;
    try {
        switch (c.kind) {
        case CommandKind::Pause: trainer.pause(); break;
        case CommandKind::Resume: trainer.resume(); break;
        case CommandKind::Stop: trainer.stop(); break;
        case CommandKind::SwitchRecipe:
            if (c.run == -1) {
                (void)training_recipe(c.recipe);  // refuse before any run switches
                for (int r = 0; r < trainer.runs(); ++r) trainer.switch_recipe(r, c.recipe);
            } else {
                trainer.switch_recipe(c.run, c.recipe);
            }
            break;
        case CommandKind::SetCaptureEvery:
            if (c.value < 0 || c.value > INT_MAX)
                return {false, "capture interval out of range: " + std::to_string(c.value)};
            trainer.set_capture_every(static_cast<int>(c.value));
            break;
        case CommandKind::Checkpoint: trainer.checkpoint_now(); break;
        default: return {false, "unknown command " + std::to_string(static_cast<int>(c.kind))};
        }
    } catch (const std::exception& e) {
        return {false, e.what()};
    }
    return {true, ""};
}

std::string random_token() {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string t;
    for (int i = 0; i < 4; ++i) {
        std::uint32_t v = rd();
        for (int j = 0; j < 8; ++j, v >>= 4) t += hex[v & 15];
    }
    return t;
}

LiveTrain::LiveTrain(Trainer& trainer, trace::TraceMeta meta, const live::Endpoint& endpoint, std::string token)
    : training_recipes_(training_recipe_names()) {
    server_ = std::make_unique<live::LiveServer>(
        endpoint, std::move(token), std::move(meta),
        [&trainer](const live::Command& c) { return apply_command(trainer, c); });
    server_->publish(event_record(-1, trainer.steps_done(), trace::EventKind::Start, ""));
}

LiveTrain::~LiveTrain() = default;

void LiveTrain::on_step(const StepRecord& s) {
    trace::StepRecord r;
    r.run = s.run;
    r.step = s.step;
    r.loss = s.loss;
    r.eval_loss = s.eval_loss ? static_cast<double>(*s.eval_loss) : trace::kNone;
    r.lr = s.lr;
    r.grad_norm = s.grad_norm;
    r.step_time_s = s.step_time_s;
    r.tokens_per_s = s.tokens_per_s;
    r.recipe = index_of(training_recipes_, s.recipe);
    server_->publish(r);
}

void LiveTrain::on_event(const TrainEvent& e) {
    if (auto kind = trace_kind(e.kind)) server_->publish(event_record(e.run, e.step, *kind, e.detail));
}

void LiveTrain::finish(std::int64_t steps_done, const std::string& why) {
    server_->publish(event_record(-1, steps_done, trace::EventKind::End, why));
}

}  // namespace fp8scope::cli
