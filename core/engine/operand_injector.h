// Applies a model's outlier injections (engine/injection.h) to the operands Fp8Linear is
// about to cast: a copy of the operand with the entries in force at the step scaled by the
// backend (LayerOps::scale_channels), so the tensors other layers read stay as they were.
// x and w get a copy per linear (their casts are read again in backward), dy one shared copy.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend.h"
#include "engine/injection.h"

namespace fp8scope {

class OperandInjector {
public:
    explicit OperandInjector(Backend& backend);
    ~OperandInjector();

    // Replaces the entries; their indices go to backend memory once.
    void set(const std::vector<LinearInjection>& list, std::size_t linears);
    bool empty() const { return per_linear_.empty(); }
    // `values` (rows,cols) as operand o of `linear` reaches its cast at `step`: values
    // itself when no entry is in force, else the scaled copy. Throws std::logic_error when an
    // index lies outside `values` (a batch other than the one the entries were checked for).
    TensorDesc apply(int linear, Operand o, const TensorDesc& values, std::int64_t step);

private:
    struct Entry;
    struct Linear;

    Backend& backend_;
    std::vector<std::unique_ptr<Linear>> per_linear_;  // empty: no injections
    DeviceBuffer<float> dy_;                           // the scaled dy of the linear in backward
};

}  // namespace fp8scope
