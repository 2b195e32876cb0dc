#include "kernel_recorder.h"

#include <charconv>
#include <stdexcept>

#include "kernel_steps.h"

namespace fp8scope::trace {

KernelPolicy KernelPolicy::parse(const std::string& text, std::int64_t window) {
    if (window < 0) throw std::invalid_argument("kernel window " + std::to_string(window) + " is negative");
    if (text == "all") return {All, 0, window};
    if (text == "capture") return {Capture, 0, window};
    if (text == "off") return {Off, 0, window};
    if (text.starts_with("every=")) {
        const std::string n = text.substr(6);
        std::int64_t every = 0;
        const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), every);
        if (!n.empty() && ec == std::errc() && end == n.data() + n.size() && every >= 1) return {Every, every, window};
    }
    throw std::invalid_argument("kernel timings '" + text + "': expected all, capture, every=N (N >= 1) or off");
}

std::string KernelPolicy::name() const {
    switch (mode) {
    case All: return "all";
    case Capture: return "capture";
    case Every: return "every=" + std::to_string(every);
    case Off: break;
    }
    return "off";
}

KernelRecorder::KernelRecorder(RecordSink& sink, OpNames& ops, KernelPolicy policy)
    : sink_(sink), ops_(ops), policy_(policy) {}

void KernelRecorder::note_scope(std::uint64_t scope, const OpRecord& host, std::uint64_t scope_end) {
    std::lock_guard lock(mu_);
    scopes_[scope] = host;
    if (scope_end > scope + 1) ranges_[scope] = scope_end;
}

const OpRecord* KernelRecorder::owner(std::uint64_t scope) const {
    if (!scope) return nullptr;
    if (auto it = scopes_.find(scope); it != scopes_.end()) return &it->second;
    // The nearest enclosing range starts last among those that hold the scope.
    for (auto it = ranges_.lower_bound(scope); it != ranges_.begin();) {
        --it;
        if (scope < it->second) return &scopes_.at(it->first);
    }
    return nullptr;
}

bool KernelRecorder::keeps(std::int64_t step, bool capture) {
    bool keep = policy_.mode == KernelPolicy::All || (policy_.mode == KernelPolicy::Capture && capture) ||
                (policy_.mode == KernelPolicy::Every && (step - 1) % policy_.every == 0);
    if (after_ > 0) {
        --after_;
        keep = true;
    }
    if (requested_ > 0) {
        --requested_;
        keep = true;
    }
    return keep;
}

void KernelRecorder::begin_step(std::int64_t step, bool capture) {
    std::deque<Step> done;
    {
        std::lock_guard lock(mu_);
        step_ = step;
        std::erase_if(scopes_, [&](const auto& s) { return s.second.step < step - 1; });
        std::erase_if(ranges_, [&](const auto& r) { return !scopes_.count(r.first); });
        steps_.push_back({step, keeps(step, capture), {}});
        // The current step and `window` before it stay; older ones are decided.
        while (static_cast<std::int64_t>(steps_.size()) > policy_.window + 1) {
            done.push_back(std::move(steps_.front()));
            steps_.pop_front();
        }
    }
    for (Step& s : done) write_step(s);
}

void KernelRecorder::mark_event() {
    if (policy_.mode == KernelPolicy::All || policy_.mode == KernelPolicy::Off) return;
    std::lock_guard lock(mu_);
    for (Step& s : steps_) s.keep = true;
    after_ = std::max(after_, policy_.window);
}

void KernelRecorder::request(std::int64_t steps) {
    std::lock_guard lock(mu_);
    requested_ = std::max(requested_, steps);
}

void KernelRecorder::flush() {
    std::deque<Step> done;
    {
        std::lock_guard lock(mu_);
        done.swap(steps_);
    }
    for (Step& s : done) write_step(s);
}

std::int64_t KernelRecorder::recorded() const {
    std::lock_guard lock(mu_);
    return recorded_;
}

std::int64_t KernelRecorder::summed() const {
    std::lock_guard lock(mu_);
    return summed_;
}

// The sums, then the records they were made of (when kept): a reader that has a step's
// records has its sums.
void KernelRecorder::write_step(Step& s) {
    if (s.records.empty()) return;
    for (KernelStepRecord& k : sum_kernel_steps(s.records, s.keep)) sink_.write(k);
    if (s.keep)
        for (OpRecord& r : s.records) sink_.write(std::move(r));
    std::lock_guard lock(mu_);
    summed_ += static_cast<std::int64_t>(s.records.size());
    if (s.keep) recorded_ += static_cast<std::int64_t>(s.records.size());
}

void KernelRecorder::on_kernels(const KernelTiming* timings, std::size_t n) {
    std::vector<OpRecord> out;
    out.reserve(n);
    {
        std::lock_guard lock(mu_);
        for (std::size_t i = 0; i < n; ++i) {
            const KernelTiming& k = timings[i];
            OpRecord r;
            r.step = step_;
            if (const OpRecord* found = owner(k.scope)) {
                const OpRecord& host = *found;
                r.run = host.run;
                r.step = host.step;
                r.parent = host.op;
                r.linear = host.linear;
                r.layer = host.layer;
                r.operand = host.operand;
            }
            r.kind = static_cast<OpKind>(k.kind);
            r.device = k.device;
            r.stream = static_cast<std::int32_t>(k.stream);
            r.start_ns = k.start_ns;
            r.end_ns = k.end_ns;
            r.bytes = k.bytes;
            out.push_back(r);
        }
    }
    // Names outside the lock: OpNames writes an OpNameRecord for a new one.
    for (std::size_t i = 0; i < n; ++i) out[i].op = ops_.id(timings[i].name, sink_);
    std::deque<Step> late;
    {
        std::lock_guard lock(mu_);
        for (OpRecord& r : out) {
            // The newest buffered step of that number (a rewind repeats numbers); a record
            // of a step already written (or of none begun) is decided on its own.
            auto it = steps_.rbegin();
            while (it != steps_.rend() && it->step != r.step) ++it;
            if (it != steps_.rend()) {
                it->records.push_back(r);
                continue;
            }
            if (late.empty() || late.back().step != r.step)
                late.push_back({r.step, policy_.mode == KernelPolicy::All, {}});
            late.back().records.push_back(r);
        }
    }
    for (Step& s : late) write_step(s);
}

}  // namespace fp8scope::trace
