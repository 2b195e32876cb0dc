// A run's capture sink while the runs of a step go at once (Trainer on a backend with
// RunLanes): the op timings and cast figures the run's thread reports are held, then
// handed to the run's own sink from the training thread, run after run, in the order they
// came, so the sink sees what it sees when the runs go one after another. Operand and GEMM
// output captures hand over device tensors valid only during the call and cannot wait:
// capture steps run the runs one after another.
#pragma once

#include <stdexcept>
#include <variant>
#include <vector>

#include "engine/capture_sink.h"

namespace fp8scope {

class DeferredSink final : public CaptureSink {
public:
    void on_operand(const OperandCapture&) override {
        throw std::logic_error("operand capture in a step whose runs go at once (capture steps go one by one)");
    }
    void on_gemm_output(const GemmOutputCapture&) override {
        throw std::logic_error("GEMM output capture in a step whose runs go at once (capture steps go one by one)");
    }
    void on_scaling(const OperandScaling& scaling) override { held_.emplace_back(scaling); }
    // OpTiming::op names a string literal (OpTimer's op): the view outlives the step.
    void on_op(const OpTiming& timing) override { held_.emplace_back(timing); }

    // Everything held, to `to` in order; nothing is held after.
    void replay(CaptureSink& to) {
        for (const auto& call : held_) {
            if (const auto* op = std::get_if<OpTiming>(&call)) to.on_op(*op);
            else to.on_scaling(std::get<OperandScaling>(call));
        }
        held_.clear();
    }
    void clear() { held_.clear(); }

private:
    std::vector<std::variant<OpTiming, OperandScaling>> held_;
};

}  // namespace fp8scope
