// Forward and backward of the quantized linear layers (see fp8_linear.h for the design).
#include "engine/fp8_linear.h"

#include <optional>
#include <stdexcept>

#include "engine/op_timer.h"

namespace fp8scope {

struct Fp8Linear::Cached {
    std::unique_ptr<OperandStorage> x, w;
    GemmOperand xq, wq;  // the casts of the last training forward
    bool smoothed = false;  // they read the smoothing scratch, which later linears reuse
};

Fp8Linear::Fp8Linear(Backend& backend, std::vector<LinearInfo> linears)
    : backend_(backend), linears_(std::move(linears)), output_check_(backend), xs_(backend), ws_(backend),
      pending_(backend) {
    snapshot_.resize(linears_.size());
    for (std::size_t i = 0; i < linears_.size(); ++i) {
        auto c = std::make_unique<Cached>();
        c->x = backend_.make_operand_storage();
        c->w = backend_.make_operand_storage();
        cached_.push_back(std::move(c));
    }
    dy_storage_ = backend_.make_operand_storage();
    report_slots_.resize(linears_.size() * 3);
    set_recipe(training_recipe("baseline"));
}

Fp8Linear::~Fp8Linear() = default;

void Fp8Linear::set_recipe(const TrainingRecipe& recipe) {
    recipe_ = recipe;
    auto& per_linear = delayed_[recipe.name];
    if (per_linear.empty()) per_linear.resize(linears_.size());
    for (auto& h : per_linear)
        for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
            const auto& r = recipe.operand(o);
            const auto* d = r ? std::get_if<DelayedScaling>(&*r) : nullptr;
            auto& slot = h[std::size_t(o)];
            if (!d) slot.reset();
            else if (!slot) slot = backend_.make_amax_history(*d);
        }
}

void Fp8Linear::set_capture(CaptureSink* sink, bool operands) {
    sink_ = sink;
    capture_operands_ = sink && operands;
}

AmaxHistory* Fp8Linear::history(int linear, Operand o) {
    return delayed_.at(recipe_.name)[std::size_t(linear)][std::size_t(o)].get();
}

std::optional<DelayedState> Fp8Linear::read(AmaxHistory* h) const {
    return h ? std::optional(h->read()) : std::nullopt;
}

std::optional<DelayedState> Fp8Linear::delayed_state(int linear, Operand o) const {
    auto it = delayed_.find(recipe_.name);
    if (it == delayed_.end()) return std::nullopt;
    const auto& h = it->second[std::size_t(linear)][std::size_t(o)];
    return read(h.get());
}

int Fp8Linear::layer_of(int linear) const { return linears_[std::size_t(linear)].layer; }

// The operand as its GEMMs read it: the rowwise copy and, when asked, the columnwise one.
// `report`: a training cast whose figures go to the sink after the step.
GemmOperand Fp8Linear::cast(Operand o, const TensorDesc& values, AmaxHistory* h, bool push, bool columnwise,
                            OperandStorage& storage, int linear, bool report) {
    const auto& r = recipe_.operand(o);
    CastSpec spec;
    spec.recipe = r ? &*r : nullptr;
    spec.history = h;
    spec.push = push;
    spec.columnwise = columnwise;
    spec.rounding = {seed_, step_, std::uint32_t(linear) << 3 | std::uint32_t(o) << 1};
    const std::size_t index = std::size_t(linear) * 3 + std::size_t(o);
    CastInfo* slot = &report_slots_[index];
    spec.report = report && r && sink_ ? slot : nullptr;
    if (defer_ && push && h) {
        spec.push = false;
        spec.amax_out = pending_.data() + index;
        pushes_.emplace_back(h, index);
    }
    std::optional<OpTimer> timer;
    if (r) timer.emplace(sink_, backend_, "quantize", layer_of(linear), linear, int(o));
    GemmOperand op = backend_.cast(values, spec, storage);
    timer.reset();
    if (spec.report) reports_.push_back(OperandScaling{linear, o, {}});
    return op;
}

void Fp8Linear::flush_reports() {
    if (reports_.empty()) return;
    backend_.synchronize();
    for (OperandScaling& s : reports_) {
        s.cast = report_slots_[std::size_t(s.linear) * 3 + std::size_t(s.operand)];
        if (sink_) sink_->on_scaling(s);
    }
    reports_.clear();
}

void Fp8Linear::defer_amax_pushes(bool on) {
    defer_ = on;
    pushes_.clear();
    if (on) pending_.grow(std::size_t(pending_count()));
}

void Fp8Linear::push_pending() {
    for (auto& [h, index] : pushes_) h->push(pending_.data() + index);
    pushes_.clear();
}

void Fp8Linear::capture(int linear, Gemm g, Operand o, const TensorDesc& values,
                        const std::optional<DelayedState>& state, bool transposed_repeat) {
    const auto& r = recipe_.operand(o);
    OpTimer timer(sink_, backend_, "capture", layer_of(linear), linear, int(o));
    sink_->on_operand(OperandCapture{linear, g, o, values, &backend_, r ? &*r : nullptr, state ? &*state : nullptr,
                                     transposed_repeat});
}

TensorDesc Fp8Linear::smoothed(DeviceBuffer<float>& scratch, const TensorDesc& in, const float* smooth,
                               bool inverse) {
    if (!smooth) return in;
    TensorDesc out = in;
    const std::size_t bytes = std::size_t(in.numel()) * dtype_size(in.dtype);
    out.data = scratch.grow((bytes + sizeof(float) - 1) / sizeof(float));
    backend_.scale_columns(out, in, smooth, inverse);
    return out;
}

void Fp8Linear::forward(int linear, ActPtr x, const float* w, const float* b, ActPtr y, std::int64_t N,
                        const float* smooth, bool training, const GemmEpilogue& epilogue) {
    const auto& info = linears_[std::size_t(linear)];
    const std::int64_t K = info.in_features, M = info.out_features;
    const Device dev = backend_.device();
    std::optional<OpTimer> timer;
    if (smooth) timer.emplace(sink_, backend_, "smooth_swiglu", info.layer, linear);
    const TensorDesc X = smoothed(xs_, TensorDesc::of(x, N, K, dev), smooth, false);
    const TensorDesc W = smoothed(ws_, TensorDesc::of(w, M, K, dev), smooth, true);
    timer.reset();

    AmaxHistory* hx = history(linear, Operand::X);
    AmaxHistory* hw = history(linear, Operand::W);
    if (training) {
        auto& snap = snapshot_[std::size_t(linear)];
        snap = {std::nullopt, std::nullopt};
        if (capture_operands_) {
            snap = {read(hx), read(hw)};
            capture(linear, Gemm::Fprop, Operand::X, X, snap[0]);
            capture(linear, Gemm::Fprop, Operand::W, W, snap[1]);
        }
    }
    Cached& c = *cached_[std::size_t(linear)];
    // Evaluation casts only the rowwise copies and leaves the histories as they are.
    c.xq = cast(Operand::X, X, hx, training, training, *c.x, linear, training);
    c.wq = cast(Operand::W, W, hw, training, training, *c.w, linear, training);
    c.smoothed = smooth != nullptr;

    OpTimer fprop(sink_, backend_, "fprop", info.layer, linear);
    backend_.gemm(c.xq, Copy::Rowwise, c.wq, Copy::Rowwise, TensorDesc::of(y, N, M, dev), b, false, epilogue);
    if (training && capture_operands_)
        output_check_.check(*sink_, info.layer, linear, Gemm::Fprop, c.xq, X, Copy::Rowwise, c.wq, W, Copy::Rowwise,
                            TensorDesc::of(y, N, M, dev), b, epilogue);
}

void Fp8Linear::backward(int linear, ActPtr dy, ActPtr x, const float* w, ActPtr dx, float* dw, float* db,
                         std::int64_t N, const float* smooth, const GemmEpilogue& dx_epilogue) {
    if (dx_epilogue.kind != GemmEpilogue::Kind::None && smooth)
        throw std::logic_error("Fp8Linear::backward: dx takes an epilogue or smoothing, not both");
    const auto& info = linears_[std::size_t(linear)];
    const std::int64_t K = info.in_features, M = info.out_features;
    const Device dev = backend_.device();
    const auto& snap = snapshot_[std::size_t(linear)];
    Cached& c = *cached_[std::size_t(linear)];
    // Forward cast both copies of X and W. An unquantized operand may be a view of the
    // smoothing scratch, which later linears overwrote: then it is smoothed again.
    const bool redo_x = !recipe_.x && c.smoothed, redo_w = !recipe_.w && c.smoothed;
    const TensorDesc X = redo_x || capture_operands_ ? smoothed(xs_, TensorDesc::of(x, N, K, dev), smooth, false)
                                                     : TensorDesc{};
    const TensorDesc W = redo_w || capture_operands_ ? smoothed(ws_, TensorDesc::of(w, M, K, dev), smooth, true)
                                                     : TensorDesc{};
    CastSpec columnwise_only;
    columnwise_only.rowwise = false;
    columnwise_only.columnwise = true;
    if (redo_x) c.xq = backend_.cast(X, columnwise_only, *c.x);
    if (redo_w) c.wq = backend_.cast(W, columnwise_only, *c.w);
    const GemmOperand& Xop = c.xq;
    const GemmOperand& Wop = c.wq;

    // dgrad: dX (N,K) = dY (N,M) W (M,K); contraction over M.
    const TensorDesc dY = TensorDesc::of(dy, N, M, dev);
    AmaxHistory* hdy = history(linear, Operand::DY);
    const std::optional<DelayedState> snap_dy = capture_operands_ ? read(hdy) : std::nullopt;
    auto transposed = [](TensorDesc t) {
        std::swap(t.rows, t.cols);
        t.transposed = !t.transposed;
        return t;
    };
    if (capture_operands_) capture(linear, Gemm::Dgrad, Operand::DY, dY, snap_dy);
    const GemmOperand dYop = cast(Operand::DY, dY, hdy, true, true, *dy_storage_, linear, true);
    if (capture_operands_) capture(linear, Gemm::Dgrad, Operand::W, transposed(W), snap[1], true);
    const TensorDesc dX = TensorDesc::of(dx, N, K, dev);
    {
        OpTimer dgrad(sink_, backend_, "dgrad", info.layer, linear);
        backend_.gemm(dYop, Copy::Rowwise, Wop, Copy::Columnwise, dX, nullptr, false, dx_epilogue);
        if (capture_operands_)
            output_check_.check(*sink_, info.layer, linear, Gemm::Dgrad, dYop, dY, Copy::Rowwise, Wop, W,
                                Copy::Columnwise, dX, nullptr, dx_epilogue);
        if (smooth) backend_.scale_columns(dX, dX, smooth, false);  // X' = X diag(s): dX = dX' diag(s)
    }

    // wgrad: dW (M,K) = dY^T (M,N) X (N,K); contraction over N.
    if (capture_operands_) {
        capture(linear, Gemm::Wgrad, Operand::DY, transposed(dY), snap_dy, true);
        capture(linear, Gemm::Wgrad, Operand::X, transposed(X), snap[0], true);
    }
    OpTimer wgrad(sink_, backend_, "wgrad", info.layer, linear);
    const TensorDesc dW = TensorDesc::of(dw, M, K, dev);
    backend_.gemm(dYop, Copy::Columnwise, Xop, Copy::Columnwise, dW, nullptr, false, {});
    if (capture_operands_)
        output_check_.check(*sink_, info.layer, linear, Gemm::Wgrad, dYop, dY, Copy::Columnwise, Xop, X,
                            Copy::Columnwise, dW, nullptr, {});
    if (smooth) backend_.scale_columns(dW, dW, smooth, true);  // W' = W diag(1/s): dW = dW' diag(1/s)
    if (db) backend_.bias_backward(db, dY);
}

}  // namespace fp8scope
