// ModelConfig: the resolved MLP width and the checks a model runs before allocating.
#include "engine/model_config.h"

#include <stdexcept>

namespace fp8scope {

int ModelConfig::hidden() const {
    if (d_ff > 0) return d_ff;
    if (mlp == MlpKind::GELU) return 4 * d_model;
    // SwiGLU keeps the parameter count of a 4*C GELU MLP: 2/3 of 4*C, up to a multiple of 64.
    int h = 8 * d_model / 3;
    return (h + 63) / 64 * 64;
}

void ModelConfig::validate() const {
    auto fail = [](const std::string& what) { throw std::invalid_argument(what); };
    if (vocab_size < 1) fail("vocab_size must be at least 1");
    if (max_seq < 1) fail("max_seq must be at least 1");
    if (n_layer < 1) fail("n_layer must be at least 1");
    if (d_model < 1) fail("d_model must be at least 1");
    if (n_head < 1) fail("n_head must be at least 1");
    if (d_model % n_head != 0) fail("d_model must be divisible by n_head");
    if (d_ff < 0) fail("d_ff must be 0 (default width) or positive");
    if (smooth_swiglu && mlp != MlpKind::SwiGLU) fail("smooth_swiglu needs mlp = swiglu");
}

}  // namespace fp8scope
