// Keyboard stepping: where each key moves the cursor, and the shortcuts that press them.
#include "models/step_keys.h"

#include <QKeyEvent>
#include <algorithm>
#include <climits>

namespace fp8scope::views {

std::int64_t step_after(const std::vector<std::int64_t>& steps, std::int64_t current, int n) {
    if (steps.empty() || n == 0) return current;
    const auto size = static_cast<std::ptrdiff_t>(steps.size());
    std::ptrdiff_t at;
    if (n > 0) {  // the first step past `current` is one place on
        at = (std::upper_bound(steps.begin(), steps.end(), current) - steps.begin()) + n - 1;
    } else {  // the last step before `current` is one place back
        at = (std::lower_bound(steps.begin(), steps.end(), current) - steps.begin()) + n;
    }
    return steps[static_cast<std::size_t>(std::clamp<std::ptrdiff_t>(at, 0, size - 1))];
}

StepKeys::StepKeys(const SeriesStore* store, StepCursor* cursor, const Selection* selection, QObject* parent)
    : QObject(parent), store_(store), cursor_(cursor), selection_(selection) {}

std::vector<std::int64_t> StepKeys::stops() const {
    return store_->read([&](const TraceData& d) {
        std::vector<std::int64_t> out;
        const int run = selection_->run();
        if (run < 0 || run >= static_cast<int>(d.runs.size())) return out;
        const RunData& r = d.runs[run];
        if (!r.capture_steps.empty()) return r.capture_steps;
        for (double s : r.steps.step) out.push_back(static_cast<std::int64_t>(s));
        return out;
    });
}

void StepKeys::by(int n) {
    if (cursor_->last() < 0) return;
    cursor_->setStep(step_after(stops(), cursor_->step(), n));
}

void StepKeys::toFirst() {
    if (cursor_->last() >= 0) cursor_->setStep(cursor_->first());
}

void StepKeys::toLast() {
    if (cursor_->last() >= 0) cursor_->setStep(cursor_->last());
}

namespace {
// One row per key: how far it moves (kFirst/kLast: to the ends) and what the list says.
constexpr int kFirst = INT_MIN, kLast = INT_MAX;
struct Binding {
    Qt::Key key;
    int n;
    const char* what;
};
constexpr Binding kBindings[] = {{Qt::Key_Right, 1, "next capture step"},
                                 {Qt::Key_Left, -1, "previous capture step"},
                                 {Qt::Key_PageDown, StepKeys::kPage, "10 capture steps on"},
                                 {Qt::Key_PageUp, -StepKeys::kPage, "10 capture steps back"},
                                 {Qt::Key_Home, kFirst, "first step"},
                                 {Qt::Key_End, kLast, "last step"}};
}  // namespace

std::vector<StepKeys::Key> StepKeys::keys() {
    std::vector<Key> out;
    for (const Binding& b : kBindings) out.push_back({QKeySequence(b.key), tr(b.what)});
    return out;
}

void StepKeys::bind(QObject* window) { window->installEventFilter(this); }

bool StepKeys::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() != QEvent::KeyPress) return QObject::eventFilter(watched, event);
    const auto* key = static_cast<QKeyEvent*>(event);
    if (key->modifiers() & ~Qt::KeypadModifier) return false;
    for (const Binding& b : kBindings) {
        if (key->key() != b.key) continue;
        if (b.n == kFirst) toFirst();
        else if (b.n == kLast) toLast();
        else by(b.n);
        return true;
    }
    return false;
}

}  // namespace fp8scope::views
