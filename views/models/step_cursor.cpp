// Step cursor: clamping, follow/pause and the replay clock.
#include "models/step_cursor.h"

#include <algorithm>

namespace fp8scope::views {

StepCursor::StepCursor(QObject* parent) : QObject(parent) {
    connect(&clock_, &QTimer::timeout, this, &StepCursor::tick);
}

void StepCursor::setRange(std::int64_t first, std::int64_t last) {
    if (first == first_ && last == last_) return;
    first_ = first;
    last_ = last;
    emit rangeChanged(first, last);
    if (mode_ == Mode::Follow || step_ < 0) move(last);
    else move(std::clamp(step_, first_, last_));
}

void StepCursor::setStep(std::int64_t step) {
    setMode(Mode::Paused);
    move(step);
}

void StepCursor::follow() {
    setMode(Mode::Follow);
    move(last_);
}

void StepCursor::pause() { setMode(Mode::Paused); }

void StepCursor::play(std::int64_t stride, int interval_ms) {
    stride_ = std::max<std::int64_t>(1, stride);
    if (step_ >= last_) move(first_);  // replay from the start when at the end
    setMode(Mode::Playing);
    clock_.start(interval_ms);
}

void StepCursor::move(std::int64_t step) {
    if (last_ >= 0) step = std::clamp(step, first_, last_);
    else step = -1;
    if (step == step_) return;
    step_ = step;
    emit stepChanged(step);
}

void StepCursor::setMode(Mode m) {
    if (m != Mode::Playing) clock_.stop();
    if (m == mode_) return;
    mode_ = m;
    emit modeChanged(m);
}

void StepCursor::tick() {
    if (step_ >= last_) {
        setMode(Mode::Paused);
        return;
    }
    move(step_ + stride_);
}

}  // namespace fp8scope::views
