// Forward and backward of the quantized linear layers (see fp8_linear.h for the design).
#include "engine/fp8_linear.h"

#include <stdexcept>

#include "cpu/ops/matmul.h"
#include "util/clock.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

float* grow(std::vector<float>& v, std::int64_t n) {
    if (v.size() < std::size_t(n)) v.resize(std::size_t(n));
    return v.data();
}

// m (rows,cols): columns scaled by s[c] (or by 1/s[c] when `inverse`).
void scale_columns(float* out, const float* in, const float* s, std::int64_t rows, std::int64_t cols,
                   bool inverse) {
    parallel_for(rows, 16, 0, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = 0; c < cols; ++c)
                out[r * cols + c] = inverse ? in[r * cols + c] / s[c] : in[r * cols + c] * s[c];
    });
}

}  // namespace

bool columnwise_is_transpose(const std::optional<Recipe>& r) {
    if (!r) return true;
    if (std::holds_alternative<CurrentScaling>(*r) || std::holds_alternative<DelayedScaling>(*r)) return true;
    if (const auto* b = std::get_if<BlockScaling>(&*r)) return b->block_rows == b->block_cols;
    return false;
}

Fp8Linear::Fp8Linear(std::vector<LinearInfo> linears) : linears_(std::move(linears)) {
    std::size_t xo = 0, wo = 0;
    for (const auto& l : linears_) {
        x_offset_.push_back(xo);
        w_offset_.push_back(wo);
        xo += std::size_t(l.in_features);
        wo += std::size_t(l.in_features * l.out_features);
    }
    snapshot_.resize(linears_.size());
    set_recipe(training_recipe("baseline"));
}

void Fp8Linear::set_recipe(const TrainingRecipe& recipe) {
    recipe_ = recipe;
    auto& states = delayed_[recipe.name];
    if (states.empty()) states.resize(linears_.size());
    for (auto& s : states)
        for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
            const auto& r = recipe.operand(o);
            const auto* d = r ? std::get_if<DelayedScaling>(&*r) : nullptr;
            auto& slot = s[std::size_t(o)];
            if (!d) slot.reset();
            else if (!slot) slot.emplace(*d);
        }
}

void Fp8Linear::set_capture(CaptureSink* sink, bool operands) {
    sink_ = sink;
    capture_operands_ = sink && operands;
}

DelayedState* Fp8Linear::live_state(int linear, Operand o) {
    auto& slot = delayed_.at(recipe_.name)[std::size_t(linear)][std::size_t(o)];
    return slot ? &*slot : nullptr;
}

const DelayedState* Fp8Linear::delayed_state(int linear, Operand o) const {
    auto it = delayed_.find(recipe_.name);
    if (it == delayed_.end()) return nullptr;
    const auto& slot = it->second[std::size_t(linear)][std::size_t(o)];
    return slot ? &*slot : nullptr;
}

void Fp8Linear::timing(const char* op, int linear, std::int64_t start_ns) const {
    if (!sink_) return;
    sink_->on_op(OpTiming{op, linear, linears_[std::size_t(linear)].layer, start_ns, now_ns()});
}

// The values a GEMM reads for one operand: `values` itself when the operand stays
// float32, else its fake-quantized copy in `out`. A delayed `state` has its amax pushed.
const float* Fp8Linear::cast(Operand o, const float* values, std::int64_t rows, std::int64_t cols, float* out,
                             DelayedState* state, int linear, bool report) {
    const auto& r = recipe_.operand(o);
    if (!r) return values;
    std::int64_t t0 = sink_ ? now_ns() : 0;
    const CastInfo info = fake_quantize(MatrixView{values, rows, cols}, *r, out, state);
    timing("quantize", linear, t0);
    if (report && sink_) sink_->on_scaling(OperandScaling{linear, o, info});
    return out;
}

void Fp8Linear::capture(int linear, Gemm g, Operand o, const float* values, std::int64_t rows,
                        std::int64_t cols, const DelayedState* state, bool transposed_repeat) {
    const auto& r = recipe_.operand(o);
    sink_->on_operand(OperandCapture{linear, g, o, MatrixView{values, rows, cols}, r ? &*r : nullptr, state,
                                     transposed_repeat});
}

const float* Fp8Linear::smoothed_x(const float* x, const float* smooth, std::int64_t N, std::int64_t K) {
    if (!smooth) return x;
    float* out = grow(xs_, N * K);
    scale_columns(out, x, smooth, N, K, false);
    return out;
}

const float* Fp8Linear::smoothed_w(const float* w, const float* smooth, std::int64_t M, std::int64_t K) {
    if (!smooth) return w;
    float* out = grow(ws_, M * K);
    scale_columns(out, w, smooth, M, K, true);
    return out;
}

float* Fp8Linear::xq(int linear, std::int64_t N) {
    if (xq_rows_ != N) {
        xq_rows_ = N;
        xq_cache_.assign(std::size_t(N) * (x_offset_.back() + std::size_t(linears_.back().in_features)), 0.0f);
    }
    return xq_cache_.data() + std::size_t(N) * x_offset_[std::size_t(linear)];
}

float* Fp8Linear::wq(int linear) {
    if (wq_cache_.empty()) {
        const auto& last = linears_.back();
        wq_cache_.resize(w_offset_.back() + std::size_t(last.in_features * last.out_features));
    }
    return wq_cache_.data() + w_offset_[std::size_t(linear)];
}

void Fp8Linear::forward(int linear, const float* x, const float* w, const float* b, float* y, std::int64_t N,
                        const float* smooth, bool training) {
    const auto& info = linears_[std::size_t(linear)];
    const std::int64_t K = info.in_features, M = info.out_features;
    std::int64_t t0 = sink_ ? now_ns() : 0;
    const float* X = smoothed_x(x, smooth, N, K);
    const float* W = smoothed_w(w, smooth, M, K);
    if (smooth) timing("smooth_swiglu", linear, t0);

    States& snap = snapshot_[std::size_t(linear)];
    DelayedState* sx = live_state(linear, Operand::X);
    DelayedState* sw = live_state(linear, Operand::W);
    // Evaluation casts with copies, so the histories stay as they were.
    std::optional<DelayedState> ex, ew;
    if (training) {
        snap[0] = sx ? std::optional(*sx) : std::nullopt;
        snap[1] = sw ? std::optional(*sw) : std::nullopt;
        if (capture_operands_) {
            capture(linear, Gemm::Fprop, Operand::X, X, N, K, sx);
            capture(linear, Gemm::Fprop, Operand::W, W, M, K, sw);
        }
    } else {
        if (sx) sx = &ex.emplace(*sx);
        if (sw) sw = &ew.emplace(*sw);
    }
    const float* Xq = cast(Operand::X, X, N, K, xq(linear, N), sx, linear, training);
    const float* Wq = cast(Operand::W, W, M, K, wq(linear), sw, linear, training);

    t0 = sink_ ? now_ns() : 0;
    ops::sgemm(false, true, N, M, K, Xq, Wq, y);
    if (b) ops::add_bias(y, b, N, M);
    timing("fprop", linear, t0);
}

void Fp8Linear::backward(int linear, const float* dy, const float* x, const float* w, float* dx, float* dw,
                         float* db, std::int64_t N, const float* smooth) {
    const auto& info = linears_[std::size_t(linear)];
    const std::int64_t K = info.in_features, M = info.out_features;
    const States& snap = snapshot_[std::size_t(linear)];
    const DelayedState* snap_x = snap[0] ? &*snap[0] : nullptr;
    const DelayedState* snap_w = snap[1] ? &*snap[1] : nullptr;
    DelayedState* sdy = live_state(linear, Operand::DY);
    std::optional<DelayedState> snap_dy = sdy ? std::optional(*sdy) : std::nullopt;
    const DelayedState* snap_dy_p = snap_dy ? &*snap_dy : nullptr;
    // A cast of the other orientation must not push again: it gets a throwaway copy.
    auto scratch_state = [](const DelayedState* s, std::optional<DelayedState>& tmp) {
        return s ? &tmp.emplace(*s) : nullptr;
    };

    const bool x_rowwise = columnwise_is_transpose(recipe_.x);
    const bool w_rowwise = columnwise_is_transpose(recipe_.w);
    const bool dy_rowwise = columnwise_is_transpose(recipe_.dy);
    // The operands as forward fed them (raw or smoothed, then cast).
    const float* X = (!x_rowwise || capture_operands_ || !recipe_.x) ? smoothed_x(x, smooth, N, K) : nullptr;
    const float* W = (!w_rowwise || capture_operands_ || !recipe_.w) ? smoothed_w(w, smooth, M, K) : nullptr;
    const float* Xq = recipe_.x ? xq(linear, N) : X;
    const float* Wq = recipe_.w ? wq(linear) : W;

    // dgrad: dX (N,K) = dY (N,M) W (M,K); contraction over M.
    if (capture_operands_) capture(linear, Gemm::Dgrad, Operand::DY, dy, N, M, snap_dy_p);
    const float* dYq = cast(Operand::DY, dy, N, M, grow(dyq_, N * M), sdy, linear, true);
    float* Wt = nullptr;
    if (!w_rowwise || capture_operands_) ops::transpose(Wt = grow(wt_, K * M), W, M, K);
    if (capture_operands_) capture(linear, Gemm::Dgrad, Operand::W, Wt, K, M, snap_w, true);
    std::int64_t t0 = sink_ ? now_ns() : 0;
    if (w_rowwise) {
        ops::sgemm(false, false, N, K, M, dYq, Wq, dx);
    } else {
        std::optional<DelayedState> tmp;
        const float* Wtq = cast(Operand::W, Wt, K, M, grow(wtq_, K * M), scratch_state(snap_w, tmp), linear, false);
        t0 = sink_ ? now_ns() : 0;
        ops::sgemm(false, true, N, K, M, dYq, Wtq, dx);
    }
    if (smooth) scale_columns(dx, dx, smooth, N, K, false);  // X' = X diag(s): dX = dX' diag(s)
    timing("dgrad", linear, t0);

    // wgrad: dW (M,K) = dY^T (M,N) X (N,K); contraction over N.
    float* dYt = nullptr;
    float* Xt = nullptr;
    if (!dy_rowwise || capture_operands_) ops::transpose(dYt = grow(dyt_, M * N), dy, N, M);
    if (!x_rowwise || capture_operands_) ops::transpose(Xt = grow(xt_, K * N), X, N, K);
    if (capture_operands_) {
        capture(linear, Gemm::Wgrad, Operand::DY, dYt, M, N, snap_dy_p, true);
        capture(linear, Gemm::Wgrad, Operand::X, Xt, K, N, snap_x, true);
    }
    std::optional<DelayedState> tmp_dy, tmp_x;
    const float* A = dy_rowwise ? dYq : cast(Operand::DY, dYt, M, N, grow(dytq_, M * N),
                                              scratch_state(snap_dy_p, tmp_dy), linear, false);
    const float* B = x_rowwise ? Xq : cast(Operand::X, Xt, K, N, grow(xtq_, K * N),
                                            scratch_state(snap_x, tmp_x), linear, false);
    t0 = sink_ ? now_ns() : 0;
    // A is dY (N,M) or dY^T (M,N); B is X (N,K) or X^T (K,N).
    ops::sgemm(dy_rowwise, !x_rowwise, M, K, N, A, B, dw);
    if (smooth) scale_columns(dw, dw, smooth, M, K, true);  // W' = W diag(1/s): dW = dW' diag(1/s)
    if (db) ops::bias_backward(db, dy, N, M);
    timing("wgrad", linear, t0);
}

}  // namespace fp8scope
