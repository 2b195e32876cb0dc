// A run's op and kernel records in the series store, step ascending, packed: a
// trace::OpRecord takes 80 bytes (its run and padding in every record); a stored one
// takes 56, with the byte count of copies and memsets kept aside (most records have
// none). On a large trace the ops are, after the operand summaries, most of the store.
//
// Reads hand back whole records (rebuilt, by value): `const trace::OpRecord& op = ops[i]`
// works as it does on a vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "trace_records.h"

namespace fp8scope::views {

class OpList {
public:
    std::size_t size() const { return ops_.size(); }
    bool empty() const { return ops_.empty(); }
    trace::OpRecord operator[](std::size_t i) const;
    trace::OpRecord back() const { return (*this)[size() - 1]; }
    std::int64_t step(std::size_t i) const { return ops_[i].step; }  // ops[i].step
    bool device(std::size_t i) const { return ops_[i].device >= 0; }  // is_device(ops[i]), unbuilt

    // Appends `op`, whose step is not older than the last one's (the store cuts the list
    // back first: truncate()).
    void push_back(const trace::OpRecord& op);
    // Keeps the first `n` records.
    void truncate(std::size_t n);
    // The records of one step: [first, last); both are where the step's records would go
    // when it has none.
    std::pair<std::size_t, std::size_t> of_step(std::int64_t step) const;
    // Bytes allocated (for benchmarks).
    std::size_t bytes() const;

private:
    struct Packed {
        std::int64_t step, start_ns, end_ns;
        std::int32_t op, linear, layer, device, stream, parent, operand;
        trace::OpKind kind;
    };
    static_assert(sizeof(Packed) == 56);
    struct Bytes {
        std::size_t index;
        std::int64_t bytes;
    };
    std::int32_t run_ = 0;
    std::vector<Packed> ops_;
    std::vector<Bytes> bytes_;  // records with bytes != 0, index ascending
};

}  // namespace fp8scope::views
