#include "kernel_recorder.h"

#include <vector>

namespace fp8scope::trace {

KernelRecorder::KernelRecorder(RecordSink& sink, OpNames& ops) : sink_(sink), ops_(ops) {}

void KernelRecorder::note_scope(std::uint64_t scope, const OpRecord& host) {
    std::lock_guard lock(mu_);
    scopes_[scope] = host;
}

void KernelRecorder::begin_step(std::int64_t step) {
    std::lock_guard lock(mu_);
    step_ = step;
    std::erase_if(scopes_, [&](const auto& s) { return s.second.step < step - 1; });
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
            if (auto it = scopes_.find(k.scope); k.scope && it != scopes_.end()) {
                const OpRecord& host = it->second;
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
