// The model's forward and backward passes, llm.c style: ops called in order over the
// carved tensors. Backward overwrites every parameter gradient (each parameter is used
// once per step, the embeddings are zeroed and then scatter-added; a tied head's
// gradient is written first and the embedding's scatter adds to it), and accumulates the
// residual stream's gradient in dresidual, which every block adds into with +=.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <stdexcept>

#include "engine/model_impl.h"
#include "engine/op_timer.h"
#include "engine/step_sync.h"
#include "util/clock.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

// splitmix64 + Box-Muller: a normal stream that is the same on every platform.
class NormalRng {
public:
    explicit NormalRng(std::uint64_t seed) : state_(seed) {}
    double uniform() {  // (0, 1)
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        return (double(z >> 11) + 0.5) * 0x1.0p-53;
    }
    float normal() {  // both values of a Box-Muller pair; float math is plenty for init
        if (have_spare_) {
            have_spare_ = false;
            return spare_;
        }
        float r = std::sqrt(-2.0f * std::log(float(uniform()))), phi = 6.28318531f * float(uniform());
        spare_ = r * std::sin(phi);
        have_spare_ = true;
        return r * std::cos(phi);
    }

private:
    std::uint64_t state_;
    float spare_ = 0;
    bool have_spare_ = false;
};

// The float's shortest decimal read as a double (0.02f -> 0.02): a std given as 0.02
// scales the residual projections exactly as the double 0.02 always did.
double as_decimal(float v) {
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::strtod(std::string(buf, end).c_str(), nullptr) : double(v);
}

}  // namespace

Model::Impl::Impl(const ModelConfig& c, Backend& b)
    : backend(b), config(c), params(b), grads(b), stats(b), acts(b), rope(b),
      linear(b, (c.validate(), model_linears(c))), tokens(b), targets(b) {
    n_params = carve_params(c, nullptr, p, &tensors);
    params.resize(n_params);
    grads.resize(n_params);
    carve_params(c, params.data(), p, nullptr);
    carve_params(c, grads.data(), dp, nullptr);
    smoothed.assign(std::size_t(c.n_layer), false);
    if (c.pos == PosKind::Rope) {
        const std::vector<float> table = rope_table(c.max_seq, c.head_dim(), c.rope_theta);
        rope.resize(table.size());
        backend.copy_from_host(rope.data(), table.data(), sizeof(float) * table.size());
    }
}

void Model::Impl::ensure_activations(int b, int t) {
    if (b == B && t == T) return;
    const std::int64_t att = backend.attention_saved(b, t, config.n_head);
    const DType dt = backend.activation_dtype();
    ActivationSizes n = carve_activations(config, b, t, att, ActPtr{nullptr, dt}, nullptr, a);
    acts.grow(n.acts * dtype_size(dt));
    stats.grow(n.stats);
    carve_activations(config, b, t, att, ActPtr{acts.data(), dt}, stats.data(), a);
    tokens.grow(std::size_t(b) * std::size_t(t));
    targets.grow(std::size_t(b) * std::size_t(t));
    B = b;
    T = t;
}

float Model::Impl::run_forward(const std::int32_t* tok, const std::int32_t* tgt, int b, int t, bool training) {
    const ModelConfig& c = config;
    if (b < 1 || t < 1 || t > c.max_seq)
        throw std::invalid_argument("forward: need B >= 1 and 1 <= T <= max_seq (" + std::to_string(c.max_seq) + ")");
    for (std::int64_t i = 0; i < std::int64_t(b) * t; ++i)
        if (tok[i] < 0 || tok[i] >= c.vocab_size || tgt[i] < 0 || tgt[i] >= c.vocab_size)
            throw std::invalid_argument("forward: token or target outside [0, vocab_size)");
    ensure_activations(b, t);
    backend.copy_from_host(tokens.data(), tok, sizeof(std::int32_t) * std::size_t(b) * std::size_t(t));
    backend.copy_from_host(targets.data(), tgt, sizeof(std::int32_t) * std::size_t(b) * std::size_t(t));
    have_forward = false;
    if (training) {  // pushes and cast figures of a step given up (a rewind): it never happened
        linear.discard_pending();
        linear.discard_reports();
    }

    const std::int64_t N = std::int64_t(B) * T, C = c.d_model, V = c.vocab_size, H = c.hidden();
    const std::int64_t H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H, QKV = c.qkv_width();
    const int NH = c.n_head, KV = c.kv_heads(), hs = c.head_dim();
    const bool ln = c.norm == NormKind::LayerNorm, rotary = c.pos == PosKind::Rope;
    const char* norm_op = ln ? "layernorm" : "rmsnorm";
    auto norm = [&](ActPtr out, float* mean, float* rstd, ActPtr in, const float* w, const float* bias) {
        if (ln) backend.layernorm_forward(out, mean, rstd, in, w, bias, N, int(C));
        else backend.rmsnorm_forward(out, rstd, in, w, N, int(C));
    };
    const std::int64_t att = backend.attention_saved(B, T, c.n_head);
    auto at = [](float* base, std::int64_t l, std::int64_t size) { return base ? base + l * size : nullptr; };

    {
        OpTimer timer(sink, backend, "embedding", -1);
        backend.embedding_forward(a.encoded, tokens.data(), p.wte, p.wpe, B, T, int(C));
    }
    for (int l = 0; l < c.n_layer; ++l) {
        const ActPtr residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * N * C;
        const ActPtr ln1 = a.ln1 + l * N * C;
        const ActPtr qkv = a.qkv + l * N * QKV;
        const ActPtr atty = a.atty + l * N * C;
        const ActPtr residual2 = a.residual2 + l * N * C;
        const ActPtr ln2 = a.ln2 + l * N * C;
        const ActPtr fch = a.fch + l * N * H1;
        const ActPtr fch_act = a.fch_act + l * N * H;
        const int lin = l * kLinearsPerBlock;
        {
            OpTimer timer(sink, backend, norm_op, l);
            norm(ln1, at(a.ln1_mean, l, N), a.ln1_rstd + l * N, residual, p.ln1w + l * C, at(p.ln1b, l, C));
        }
        linear.forward(lin + kQkv, ln1, p.qkvw + l * QKV * C, at(p.qkvb, l, QKV), qkv, N, nullptr, training);
        if (rotary) {  // in place: attention and its backward read the rotated q and k
            OpTimer timer(sink, backend, "rope", l);
            backend.rope(qkv, rope.data(), B, T, NH, KV, hs, false);
        }
        {
            OpTimer timer(sink, backend, "attention", l);
            backend.attention_forward(atty, a.att + l * att, qkv, B, T, int(C), NH, KV);
        }
        linear.forward(lin + kProj, atty, p.projw + l * C * C, at(p.projb, l, C), a.proj_out, N, nullptr, training);
        backend.add(residual2, residual, a.proj_out, N * C);
        {
            OpTimer timer(sink, backend, norm_op, l);
            norm(ln2, at(a.ln2_mean, l, N), a.ln2_rstd + l * N, residual2, p.ln2w + l * C, at(p.ln2b, l, C));
        }
        // GELU happens in fc1's GEMM (fch keeps its input for backward); SwiGLU after it.
        const bool gelu = c.mlp == MlpKind::GELU;
        if (gelu)
            linear.forward(lin + kFc1, ln2, p.fc1w + l * H1 * C, at(p.fc1b, l, H1), fch_act, N, nullptr, training,
                           {GemmEpilogue::Kind::Gelu, fch});
        else
            linear.forward(lin + kFc1, ln2, p.fc1w + l * H1 * C, at(p.fc1b, l, H1), fch, N, nullptr, training);
        const float* smooth = nullptr;
        if (!gelu) {
            OpTimer timer(sink, backend, "swiglu", l);
            backend.swiglu_forward(fch_act, fch, N, int(H));
            // In float32 the smoothing cancels exactly, so only a quantized run needs it.
            if (c.smooth_swiglu && linear.plan().quantized()) {
                backend.smooth_swiglu_scales(a.smooth + l * H, fch_act, N, int(H));
                smooth = a.smooth + l * H;
            }
        }
        if (training) smoothed[std::size_t(l)] = smooth != nullptr;
        linear.forward(lin + kFc2, fch_act, p.fc2w + l * C * H, at(p.fc2b, l, C), a.proj_out, N, smooth, training);
        backend.add(a.residual3 + l * N * C, residual2, a.proj_out, N * C);
    }
    {
        OpTimer timer(sink, backend, norm_op, -1);
        norm(a.lnf, a.lnf_mean, a.lnf_rstd, a.residual3 + (c.n_layer - 1) * N * C, p.lnfw, p.lnfb);
    }
    {
        OpTimer timer(sink, backend, "head", -1);
        backend.matmul_forward(a.logits, a.lnf, p.head, nullptr, N, C, V);
    }
    OpTimer timer(sink, backend, "softmax_ce", -1);
    backend.softmax_ce_forward(a.logits, a.losses, a.logits, targets.data(), N, int(V));
    const float loss = backend.mean_loss(a.losses, N);
    have_forward = training;
    return loss;
}

void Model::Impl::run_backward(Model& self) {
    if (!have_forward) throw std::logic_error("backward: needs a training forward() first");
    have_forward = false;  // the logits buffer becomes dlogits
    const ModelConfig& c = config;
    const std::int64_t N = std::int64_t(B) * T, C = c.d_model, V = c.vocab_size, H = c.hidden();
    const std::int64_t H1 = c.mlp == MlpKind::SwiGLU ? 2 * H : H, QKV = c.qkv_width();
    const int NH = c.n_head, KV = c.kv_heads(), hs = c.head_dim();
    const bool ln = c.norm == NormKind::LayerNorm, rotary = c.pos == PosKind::Rope;
    const char* norm_op = ln ? "layernorm" : "rmsnorm";
    // dinp += norm backward; parameter gradients overwritten
    auto norm_backward = [&](ActPtr dinp, float* dw, float* db, ActPtr dout, ActPtr in, const float* w,
                             const float* mean, const float* rstd) {
        if (ln) backend.layernorm_backward(dinp, dw, db, dout, in, w, mean, rstd, N, int(C));
        else backend.rmsnorm_backward(dinp, dw, dout, in, w, rstd, N, int(C));
    };
    const std::int64_t att = backend.attention_saved(B, T, c.n_head);
    auto at = [](float* base, std::int64_t l, std::int64_t size) { return base ? base + l * size : nullptr; };

    {
        OpTimer timer(sink, backend, "softmax_ce", -1);
        backend.softmax_ce_backward(a.logits, a.logits, targets.data(), N, int(V),
                                    loss_rows > 0 ? std::int64_t(loss_rows) * T : N * loss_ranks);
    }
    {
        OpTimer timer(sink, backend, "head", -1);
        backend.matmul_backward(a.dln, dp.head, nullptr, a.logits, a.lnf, p.head, N, C, V);
    }
    {
        OpTimer timer(sink, backend, norm_op, -1);
        backend.fill_zero(a.dresidual.ptr, dtype_size(a.dresidual.dtype) * std::size_t(N * C));
        norm_backward(a.dresidual, dp.lnfw, dp.lnfb, a.dln, a.residual3 + (c.n_layer - 1) * N * C, p.lnfw,
                      a.lnf_mean, a.lnf_rstd);
    }
    auto ready = [&](int stage) {
        if (sync) sync->grads_ready(self, stage);
    };
    ready(0);
    for (int l = c.n_layer - 1; l >= 0; --l) {
        const ActPtr residual = l == 0 ? a.encoded : a.residual3 + (l - 1) * N * C;
        const int lin = l * kLinearsPerBlock;
        const float* smooth = smoothed[std::size_t(l)] ? a.smooth + l * H : nullptr;
        // dresidual holds d loss / d residual3[l]; the skip passes it on to residual2 and residual.
        // fc2's dgrad applies GELU's gradient (into dfch, no dfch_act); SwiGLU's is an op of its own.
        if (c.mlp == MlpKind::GELU) {
            linear.backward(lin + kFc2, a.dresidual, a.fch_act + l * N * H, p.fc2w + l * C * H, a.dfch,
                            dp.fc2w + l * C * H, at(dp.fc2b, l, C), N, nullptr,
                            {GemmEpilogue::Kind::GeluBackward, a.fch + l * N * H1});
        } else {
            linear.backward(lin + kFc2, a.dresidual, a.fch_act + l * N * H, p.fc2w + l * C * H, a.dfch_act,
                            dp.fc2w + l * C * H, at(dp.fc2b, l, C), N, smooth);
            OpTimer timer(sink, backend, "swiglu", l);
            backend.swiglu_backward(a.dfch, a.fch + l * N * H1, a.dfch_act, N, int(H));
        }
        linear.backward(lin + kFc1, a.dfch, a.ln2 + l * N * C, p.fc1w + l * H1 * C, a.dln, dp.fc1w + l * H1 * C,
                        at(dp.fc1b, l, H1), N, nullptr);
        {
            OpTimer timer(sink, backend, norm_op, l);
            norm_backward(a.dresidual, dp.ln2w + l * C, at(dp.ln2b, l, C), a.dln, a.residual2 + l * N * C,
                          p.ln2w + l * C, at(a.ln2_mean, l, N), a.ln2_rstd + l * N);
        }
        linear.backward(lin + kProj, a.dresidual, a.atty + l * N * C, p.projw + l * C * C, a.datty,
                        dp.projw + l * C * C, at(dp.projb, l, C), N, nullptr);
        {
            OpTimer timer(sink, backend, "attention", l);
            backend.attention_backward(a.dqkv, a.datty, a.qkv + l * N * QKV, a.atty + l * N * C, a.att + l * att, B, T,
                                       int(C), NH, KV);
        }
        if (rotary) {  // the gradient of the rotated q and k turned back: that of the linear's output
            OpTimer timer(sink, backend, "rope", l);
            backend.rope(a.dqkv, rope.data(), B, T, NH, KV, hs, true);
        }
        linear.backward(lin + kQkv, a.dqkv, a.ln1 + l * N * C, p.qkvw + l * QKV * C, a.dln, dp.qkvw + l * QKV * C,
                        at(dp.qkvb, l, QKV), N, nullptr);
        {
            OpTimer timer(sink, backend, norm_op, l);
            norm_backward(a.dresidual, dp.ln1w + l * C, at(dp.ln1b, l, C), a.dln, residual, p.ln1w + l * C,
                          at(a.ln1_mean, l, N), a.ln1_rstd + l * N);
        }
        ready(1 + (c.n_layer - 1 - l));
    }
    {
        OpTimer timer(sink, backend, "embedding", -1);
        // A tied head already wrote its gradient into dwte: the embedding's adds to it.
        if (!c.tie_embeddings) backend.fill_zero(dp.wte, sizeof(float) * std::size_t(V * C));
        if (dp.wpe) backend.fill_zero(dp.wpe, sizeof(float) * std::size_t(c.max_seq) * std::size_t(C));
        backend.embedding_backward(dp.wte, dp.wpe, a.dresidual, tokens.data(), B, T, int(C));
    }
    ready(c.n_layer + 1);
    linear.flush_reports();
}

// ---- public API ----

Model::Model(const ModelConfig& config, Backend& backend) : impl_(std::make_unique<Impl>(config, backend)) {}
Model::~Model() = default;

const ModelConfig& Model::config() const { return impl_->config; }

void Model::init(std::uint64_t seed) {
    init(seed, impl_->config.init_std);
}

void Model::init(std::uint64_t seed, float hidden_std) {
    // Each (tensor, chunk) draws from its own stream, seeded from (seed, tensor, chunk), so
    // chunks fill in parallel and the values do not depend on the thread count.
    constexpr std::int64_t kChunk = 1 << 16;
    const float residual_std = float(as_decimal(hidden_std) / std::sqrt(2.0 * impl_->config.n_layer));
    const auto& tensors = impl_->tensors;
    std::vector<float> host(impl_->n_params);  // drawn on the host, then copied to the backend
    for (std::size_t ti = 0; ti < tensors.size(); ++ti) {
        const ParamTensor& t = tensors[ti];
        float* w = host.data() + t.offset;
        const std::string& n = t.name;
        auto ends_with = [&](std::string_view s) { return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
        const std::int64_t count = std::int64_t(t.numel());
        if (t.shape.size() != 2) {
            float v = ends_with(".weight") ? 1.0f : 0.0f;  // norm gains 1, biases 0
            std::fill(w, w + count, v);
            continue;
        }
        const bool embedding = n == "wte" || n == "wpe";
        const float std = (ends_with("attn.proj.weight") || ends_with("mlp.fc2.weight")) ? residual_std
                          : embedding                                                  ? impl_->config.init_std
                                                                                       : hidden_std;
        parallel_for((count + kChunk - 1) / kChunk, 1, 0, [&](std::int64_t c0, std::int64_t c1) {
            for (std::int64_t c = c0; c < c1; ++c) {
                NormalRng rng(seed * 0x9E3779B97F4A7C15ull ^ (std::uint64_t(ti) << 40) ^ std::uint64_t(c));
                for (std::int64_t i = c * kChunk; i < std::min(count, (c + 1) * kChunk); ++i)
                    w[i] = std * rng.normal();
            }
        });
    }
    params_from_host(host);
}

Backend& Model::backend() const { return impl_->backend; }
std::size_t Model::num_params() const { return impl_->n_params; }
std::span<float> Model::params() { return {impl_->params.data(), impl_->n_params}; }
std::span<const float> Model::params() const { return {impl_->params.data(), impl_->n_params}; }
std::span<float> Model::grads() { return {impl_->grads.data(), impl_->n_params}; }

std::vector<float> Model::params_to_host() const {
    std::vector<float> out(impl_->n_params);
    impl_->backend.copy_to_host(out.data(), impl_->params.data(), sizeof(float) * out.size());
    return out;
}

void Model::params_from_host(std::span<const float> values) {
    if (values.size() != impl_->n_params)
        throw std::invalid_argument("model has " + std::to_string(impl_->n_params) + " parameters, got " +
                                    std::to_string(values.size()));
    impl_->backend.copy_from_host(impl_->params.data(), values.data(), sizeof(float) * values.size());
}

std::vector<float> Model::grads_to_host() const {
    std::vector<float> out(impl_->n_params);
    impl_->backend.copy_to_host(out.data(), impl_->grads.data(), sizeof(float) * out.size());
    return out;
}
const std::vector<ParamTensor>& Model::param_tensors() const { return impl_->tensors; }
const std::vector<LinearInfo>& Model::linears() const { return impl_->linear.linears(); }

float Model::forward(const std::int32_t* tokens, const std::int32_t* targets, int B, int T) {
    return impl_->run_forward(tokens, targets, B, T, true);
}

void Model::backward() { impl_->run_backward(*this); }

float Model::evaluate(const std::int32_t* tokens, const std::int32_t* targets, int B, int T) {
    // Evaluation is not part of a training step: no operands, no op timings.
    CaptureSink* sink = impl_->sink;
    bool operands = impl_->capture_operands;
    set_capture(nullptr, false);
    float loss = impl_->run_forward(tokens, targets, B, T, false);
    set_capture(sink, operands);
    return loss;
}

void Model::set_step_sync(StepSync* sync) {
    impl_->sync = sync;
    impl_->loss_ranks = sync ? std::max(1, sync->world_size()) : 1;
    impl_->linear.defer_amax_pushes(sync && sync->reduces_amaxes());
}
void Model::set_loss_rows(int rows) { impl_->loss_rows = rows; }
int Model::backward_stages() const { return impl_->config.n_layer + 2; }

std::span<float> Model::pending_amaxes() {
    return {impl_->linear.pending_amaxes(), std::size_t(impl_->linear.pending_count())};
}
bool Model::has_pending_amaxes() const { return impl_->linear.has_pending(); }
void Model::push_pending_amaxes() { impl_->linear.push_pending(); }
std::optional<DelayedState> Model::delayed_state(int linear, Operand o) const {
    return impl_->linear.delayed_state(linear, o);
}

void Model::set_plan(PrecisionPlan plan) { impl_->linear.set_plan(std::move(plan)); }
const PrecisionPlan& Model::plan() const { return impl_->linear.plan(); }
NonFiniteWatch& Model::nonfinite() { return impl_->linear.nonfinite(); }

void Model::set_rounding(std::uint64_t seed, std::uint64_t step) { impl_->linear.set_rounding(seed, step); }

void Model::set_injections(const std::vector<Injection>& list, std::int64_t rows) {
    impl_->linear.set_injections(resolve_injections(list, linears(), rows));
}

void Model::set_capture(CaptureSink* sink, bool operands) {
    impl_->sink = sink;
    impl_->capture_operands = sink && operands;
    impl_->linear.set_capture(sink, operands);
}

std::vector<std::uint8_t> Model::save_recipe_state() const { return impl_->linear.save_state(); }
void Model::load_recipe_state(const std::vector<std::uint8_t>& bytes) { impl_->linear.load_state(bytes); }

std::size_t ParamTensor::numel() const {
    std::size_t n = 1;
    for (auto d : shape) n *= std::size_t(d);
    return n;
}

}  // namespace fp8scope
