// Outlier injection, for stress tests: a config's "inject" list multiplies chosen channels
// (columns) or rows of one GEMM operand of some linears by a factor, over a range of
// steps, before the operand is cast, so every recipe's quantizer sees the same outlier.
// "How does my recipe cope if channel 17 of layer 3's fc2 input grows 300x?"
//
// Semantics:
// - Operands in the layout Fp8Linear casts them: x (N,K), w (M,K), dy (N,M), N = B*T rows
//   of this rank's batch. A channel is a column (x, w: an input feature; dy: an output
//   feature), a row is a token (x, dy) or an output feature (w).
// - x is scaled once, before its one cast in a training forward; that cast's copies are
//   what fprop and wgrad read, so both GEMMs see the outlier. w likewise (fprop and
//   dgrad), dy in backward (dgrad and wgrad). With Smooth-SwiGLU the smoothed operand is
//   scaled: the one that reaches the cast.
// - The scaled tensor is a copy: the activation, the master weight and the gradient stay
//   as they were, for every other reader (the residual stream, the optimizer, the bias
//   gradient). Autograd is not made consistent beyond that: each GEMM reads the tensor as
//   scaled, and the gradients flow from what the GEMMs computed.
// - Steps count as the trace does (1 is the first step trained); only training steps are
//   scaled, evaluation reads the operands as they are.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "operands.h"

namespace fp8scope {

struct Injection {
    std::int64_t step = 1;               // the first step scaled
    std::optional<std::int64_t> until;   // the last step scaled; none: every step from `step`
    std::optional<int> layer;            // the transformer block; none: every block
    std::string linear;                  // within a block: "mlp.fc2", "attn.*" (precision-plan globs)
    Operand operand = Operand::X;
    bool rows = false;                   // `indices` are rows, not channels (columns)
    std::vector<std::int64_t> indices;
    float scale = 1.0f;

    bool active(std::int64_t at_step) const { return at_step >= step && (!until || at_step <= *until); }
    // "x of blocks.1.mlp.fc2 channels 17 x300", the linear as the config names it.
    std::string describe() const;
};

// One injection resolved for one linear of a model.
struct LinearInjection {
    int linear = 0;
    Injection injection;
};

// "x", "w", "dy"; throws std::invalid_argument naming the text.
Operand operand_from_name(const std::string& name);

// The checks of an entry on its own (operand named, scale finite and > 0, until >= step,
// channels or rows and not both, non-negative indices): throws std::invalid_argument
// naming the field ("inject[0].scale") and its value.
void check_injection(const Injection& in, const std::string& field);

// The entries for these linears (layer in range, linear pattern matching in that block,
// every index inside the operand's shape for `rows_per_rank` = B*T): throws
// std::invalid_argument naming the field ("inject[0].channels") and the value.
std::vector<LinearInjection> resolve_injections(const std::vector<Injection>& list,
                                                const std::vector<LinearInfo>& linears, std::int64_t rows_per_rank);

// The run events of step `at_step` (1-based): a start where an entry's first step is, an
// end where the step after its last one is. Each event's detail names the entry.
struct InjectionEvent {
    bool start = true;
    std::string detail;
};
std::vector<InjectionEvent> injection_events(const std::vector<Injection>& list, std::int64_t at_step);

}  // namespace fp8scope
