// ModelConfig: the resolved MLP width, the architectures' defaults and the checks a model
// runs before allocating.
#include "engine/model_config.h"

#include <cmath>
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
    if (n_kv_head < 0) fail("n_kv_head must be 0 (n_head) or positive");
    if (n_head % kv_heads() != 0)
        fail("n_kv_head " + std::to_string(n_kv_head) + " must divide n_head " + std::to_string(n_head));
    if (d_ff < 0) fail("d_ff must be 0 (default width) or positive");
    if (smooth_swiglu && mlp != MlpKind::SwiGLU) fail("smooth_swiglu needs mlp = swiglu");
    if (pos == PosKind::Rope && head_dim() % 2 != 0)
        fail("pos = rope needs an even head size (d_model / n_head = " + std::to_string(head_dim()) + ")");
    if (!(rope_theta > 1.0f) || !std::isfinite(rope_theta)) fail("rope_theta must be a finite number above 1");
    if (!(init_std > 0.0f) || !std::isfinite(init_std)) fail("init_std must be a finite number above 0");
}

void apply_arch(ModelConfig& c, const std::string& arch) {
    if (arch == "gpt") {
        c.norm = NormKind::LayerNorm, c.mlp = MlpKind::GELU, c.pos = PosKind::Learned, c.bias = true;
    } else if (arch == "llama") {
        c.norm = NormKind::RMSNorm, c.mlp = MlpKind::SwiGLU, c.pos = PosKind::Rope, c.bias = false;
    } else {
        throw std::invalid_argument("arch '" + arch + "' is not one of gpt, llama");
    }
}

std::vector<float> rope_table(int T, int head_dim, double theta) {
    const int half = head_dim / 2;
    std::vector<float> table(std::size_t(T) * std::size_t(half) * 2);
    for (int t = 0; t < T; ++t)
        for (int i = 0; i < half; ++i) {
            const double angle = double(t) * std::pow(theta, -2.0 * i / head_dim);
            table[(std::size_t(t) * half + i) * 2] = float(std::cos(angle));
            table[(std::size_t(t) * half + i) * 2 + 1] = float(std::sin(angle));
        }
    return table;
}

}  // namespace fp8scope
