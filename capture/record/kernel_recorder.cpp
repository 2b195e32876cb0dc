#include "kernel_recorder.h"

#include <vector>

namespace fp8scope::trace {

KernelRecorder::KernelRecorder(RecordSink& sink, OpNames& ops) : sink_(sink), ops_(ops) {}

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

void KernelRecorder::begin_step(std::int64_t step) {
    std::lock_guard lock(mu_);
    step_ = step;
    std::erase_if(scopes_, [&](const auto& s) { return s.second.step < step - 1; });
    std::erase_if(ranges_, [&](const auto& r) { return !scopes_.count(r.first); });
}

std::int64_t KernelRecorder::recorded() const {
    std::lock_guard lock(mu_);
    return recorded_;
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
        recorded_ += static_cast<std::int64_t>(n);
    }
    // Names outside the lock: OpNames writes an OpNameRecord for a new one.
    for (std::size_t i = 0; i < n; ++i) {
        out[i].op = ops_.id(timings[i].name, sink_);
        sink_.write(out[i]);
    }
}

}  // namespace fp8scope::trace
