// Where every tensor lives: the parameters (and, with the same layout, their gradients)
// in one allocation, the activations of a step in another. Carving is one ordered table
// per allocation, so the layout is written down exactly once; offsets are in floats.
#include <string>

#include "engine/model_impl.h"

namespace fp8scope {
namespace {

using Shape = std::vector<std::int64_t>;

std::size_t numel(const Shape& s) {
    std::size_t n = 1;
    for (auto d : s) n *= std::size_t(d);
    return n;
}

}  // namespace

std::size_t carve_params(const ModelConfig& c, float* base, ParameterTensors& p,
                         std::vector<ParamTensor>* tensors) {
    const std::int64_t V = c.vocab_size, C = c.d_model, L = c.n_layer, maxT = c.max_seq, H = c.hidden();
    const std::int64_t H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H, QKV = c.qkv_width();
    const bool ln = c.norm == NormKind::LayerNorm, bias = c.bias, learned = c.pos == PosKind::Learned;
    struct Slot {
        float** field;
        const char* name;  // per-layer names get "blocks.<l>." in front
        Shape shape;       // per layer (without L) for per-layer slots
        bool per_layer, decay, present;
    };
    const Slot slots[] = {
        {&p.wte, "wte", {V, C}, false, true, true},
        {&p.wpe, "wpe", {maxT, C}, false, true, learned},
        {&p.ln1w, "ln1.weight", {C}, true, false, true},
        {&p.ln1b, "ln1.bias", {C}, true, false, ln},
        {&p.qkvw, "attn.qkv.weight", {QKV, C}, true, true, true},
        {&p.qkvb, "attn.qkv.bias", {QKV}, true, false, bias},
        {&p.projw, "attn.proj.weight", {C, C}, true, true, true},
        {&p.projb, "attn.proj.bias", {C}, true, false, bias},
        {&p.ln2w, "ln2.weight", {C}, true, false, true},
        {&p.ln2b, "ln2.bias", {C}, true, false, ln},
        {&p.fc1w, "mlp.fc1.weight", {H1, C}, true, true, true},
        {&p.fc1b, "mlp.fc1.bias", {H1}, true, false, bias},
        {&p.fc2w, "mlp.fc2.weight", {C, H}, true, true, true},
        {&p.fc2b, "mlp.fc2.bias", {C}, true, false, bias},
        {&p.lnfw, "ln_f.weight", {C}, false, false, true},
        {&p.lnfb, "ln_f.bias", {C}, false, false, ln},
        {&p.head, "head.weight", {V, C}, false, true, !c.tie_embeddings},
    };
    std::size_t offset = 0;
    if (tensors) tensors->clear();
    for (const Slot& s : slots) {
        *s.field = nullptr;
        if (!s.present) continue;
        *s.field = base ? base + offset : nullptr;
        std::size_t each = numel(s.shape);
        for (std::int64_t l = 0; l < (s.per_layer ? L : 1); ++l) {
            std::string name = s.per_layer ? "blocks." + std::to_string(l) + "." + s.name : s.name;
            // Backward finishes the head and final norm first, then the blocks from the
            // last, then the embeddings.
            const bool embedding = s.field == &p.wte || s.field == &p.wpe;
            const int stage = s.per_layer ? int(1 + (L - 1 - l)) : embedding ? int(L + 1) : 0;
            if (tensors) tensors->push_back(ParamTensor{name, offset, s.shape, s.decay, stage});
            offset += each;
        }
    }
    if (c.tie_embeddings) p.head = p.wte;  // one tensor, two uses (GPT-2)
    return offset;
}

ActivationSizes carve_activations(const ModelConfig& c, int B, int T, std::int64_t att_saved, ActPtr base,
                                  float* stats, ActivationTensors& a) {
    const std::size_t BT = std::size_t(B) * T, C = std::size_t(c.d_model), V = std::size_t(c.vocab_size);
    const std::size_t L = std::size_t(c.n_layer), H = std::size_t(c.hidden());
    const std::size_t H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H, QKV = std::size_t(c.qkv_width());
    const bool ln = c.norm == NormKind::LayerNorm;
    const std::pair<ActPtr*, std::size_t> act_slots[] = {
        {&a.encoded, BT * C},
        {&a.ln1, L * BT * C},
        {&a.qkv, L * BT * QKV},
        {&a.atty, L * BT * C},
        {&a.att, L * std::size_t(att_saved)},
        {&a.residual2, L * BT * C},
        {&a.ln2, L * BT * C},
        {&a.fch, L * BT * H1},
        {&a.fch_act, L * BT * H},
        {&a.residual3, L * BT * C},
        {&a.lnf, BT * C},
        {&a.logits, BT * V},
        {&a.proj_out, BT * C},
        {&a.dresidual, BT * C},
        {&a.dln, BT * C},
        {&a.dqkv, BT * QKV},
        {&a.datty, BT * C},
        {&a.dfch, BT * H1},
        {&a.dfch_act, c.mlp == MlpKind::SwiGLU ? BT * H : 0},  // GELU's gradient lands in dfch
    };
    const std::pair<float**, std::size_t> stat_slots[] = {
        {&a.ln1_mean, ln ? L * BT : 0},
        {&a.ln1_rstd, L * BT},
        {&a.ln2_mean, ln ? L * BT : 0},
        {&a.ln2_rstd, L * BT},
        {&a.smooth, L * H},
        {&a.lnf_mean, ln ? BT : 0},
        {&a.lnf_rstd, BT},
        {&a.losses, BT},
    };
    ActivationSizes n;
    for (const auto& [field, size] : act_slots) {
        *field = base ? base + std::int64_t(n.acts) : ActPtr{nullptr, base.dtype};
        n.acts += size;
    }
    for (const auto& [field, size] : stat_slots) {
        *field = (stats && size) ? stats + n.stats : nullptr;
        n.stats += size;
    }
    return n;
}

std::vector<LinearInfo> model_linears(const ModelConfig& c) {
    const std::int64_t C = c.d_model, H = c.hidden();
    const std::int64_t H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H, QKV = c.qkv_width();
    std::vector<LinearInfo> out;
    for (int l = 0; l < c.n_layer; ++l) {
        std::string b = "blocks." + std::to_string(l) + ".";
        out.push_back({b + "attn.qkv", l, C, QKV});
        out.push_back({b + "attn.proj", l, C, C});
        out.push_back({b + "mlp.fc1", l, C, H1});
        out.push_back({b + "mlp.fc2", l, H, C});
    }
    return out;
}

}  // namespace fp8scope
