// Progress bar and plain progress lines for training runs.
#include "train_progress.h"

#include <unistd.h>

#include <cmath>

namespace fp8scope::cli {
namespace {

std::string duration(double seconds) {
    auto s = static_cast<long long>(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else
        std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    return buf;
}

}  // namespace

TrainProgress::TrainProgress(std::int64_t total_steps, int runs, int log_every, std::int64_t first_step,
                             bool quiet)
    : total_(total_steps), first_(first_step), runs_(runs), log_every_(log_every), quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) != 0), loss_(static_cast<std::size_t>(runs), NAN),
      eval_(static_cast<std::size_t>(runs), NAN), start_(std::chrono::steady_clock::now()) {}

void TrainProgress::on_step(const StepRecord& r) {
    loss_[static_cast<std::size_t>(r.run)] = r.loss;
    if (r.eval_loss) eval_[static_cast<std::size_t>(r.run)] = *r.eval_loss;
    if (r.tokens_per_s > 0) tokens_per_step_ = r.tokens_per_s * r.step_time_s;
    if (r.run + 1 < runs_) return;  // draw once all runs did the step
    if (!quiet_ && (tty_ || r.step % log_every_ == 0 || r.eval_loss || r.step == total_)) draw(r);
}

void TrainProgress::draw(const StepRecord& r) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    double done = static_cast<double>(r.step - first_);
    double per_step = done > 0 ? elapsed / done : 0.0;
    double tok_s = per_step > 0 ? tokens_per_step_ * runs_ / per_step : 0.0;  // all runs, wall clock
    std::string losses;
    for (std::size_t i = 0; i < loss_.size(); ++i) {
        char buf[48];
        std::snprintf(buf, sizeof buf, "%s%.4f", i ? " | " : "", loss_[i]);
        losses += buf;
    }
    std::string evals;
    if (!std::isnan(eval_[0])) {
        evals = "  eval ";
        for (std::size_t i = 0; i < eval_.size(); ++i) {
            char buf[48];
            std::snprintf(buf, sizeof buf, "%s%.4f", i ? " | " : "", eval_[i]);
            evals += buf;
        }
    }
    std::string eta = duration(per_step * static_cast<double>(total_ - r.step));
    if (tty_) {
        const int width = 24;
        int filled = total_ > 0 ? static_cast<int>(width * r.step / total_) : width;
        std::string bar(static_cast<std::size_t>(filled), '#');
        bar.resize(width, '.');
        std::fprintf(stderr, "\r\033[K[%s] step %lld/%lld  loss %s%s  %.0f tok/s  ETA %s", bar.c_str(),
                     static_cast<long long>(r.step), static_cast<long long>(total_), losses.c_str(), evals.c_str(),
                     tok_s, eta.c_str());
        bar_open_ = true;
    } else {
        std::fprintf(stderr, "step %lld/%lld  loss %s%s  lr %.3g  %.0f tok/s  ETA %s\n",
                     static_cast<long long>(r.step), static_cast<long long>(total_), losses.c_str(),
                     r.eval_loss ? evals.c_str() : "", r.lr, tok_s, eta.c_str());
    }
    std::fflush(stderr);
}

void TrainProgress::on_event(const TrainEvent& e) {
    if (quiet_ && e.kind != EventKind::Error) return;
    finish();
    std::string who = e.run >= 0 ? " run " + std::to_string(e.run) : "";
    std::fprintf(stderr, "[step %lld]%s %s%s%s\n", static_cast<long long>(e.step), who.c_str(),
                 std::string(event_kind_name(e.kind)).c_str(), e.detail.empty() ? "" : ": ", e.detail.c_str());
}

void TrainProgress::finish() {
    if (bar_open_) std::fputc('\n', stderr);
    bar_open_ = false;
}

}  // namespace fp8scope::cli
