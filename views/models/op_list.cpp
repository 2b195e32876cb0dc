// Packing op records and rebuilding them.
#include "models/op_list.h"

#include <algorithm>

namespace fp8scope::views {

trace::OpRecord OpList::operator[](std::size_t i) const {
    const Packed& p = ops_[i];
    trace::OpRecord r;
    r.run = run_;
    r.step = p.step;
    r.op = p.op;
    r.linear = p.linear;
    r.layer = p.layer;
    r.device = p.device;
    r.stream = p.stream;
    r.start_ns = p.start_ns;
    r.end_ns = p.end_ns;
    r.kind = p.kind;
    r.parent = p.parent;
    r.operand = p.operand;
    if (!bytes_.empty()) {
        auto it = std::lower_bound(bytes_.begin(), bytes_.end(), i, [](const Bytes& b, std::size_t at) { return b.index < at; });
        if (it != bytes_.end() && it->index == i) r.bytes = it->bytes;
    }
    return r;
}

void OpList::push_back(const trace::OpRecord& op) {
    run_ = op.run;
    if (op.bytes != 0) bytes_.push_back({ops_.size(), op.bytes});
    ops_.push_back({op.step, op.start_ns, op.end_ns, op.op, op.linear, op.layer, op.device, op.stream, op.parent, op.operand, op.kind});
}

void OpList::truncate(std::size_t n) {
    if (n >= ops_.size()) return;
    ops_.resize(n);
    while (!bytes_.empty() && bytes_.back().index >= n) bytes_.pop_back();
}

std::pair<std::size_t, std::size_t> OpList::of_step(std::int64_t step) const {
    auto lo = std::lower_bound(ops_.begin(), ops_.end(), step, [](const Packed& p, std::int64_t s) { return p.step < s; });
    auto hi = std::upper_bound(lo, ops_.end(), step, [](std::int64_t s, const Packed& p) { return s < p.step; });
    return {static_cast<std::size_t>(lo - ops_.begin()), static_cast<std::size_t>(hi - ops_.begin())};
}

std::size_t OpList::bytes() const {
    return ops_.capacity() * sizeof(Packed) + bytes_.capacity() * sizeof(Bytes);
}

}  // namespace fp8scope::views
