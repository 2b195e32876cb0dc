// Forward and backward of the quantized linear layers (see fp8_linear.h for the design).
#include "engine/fp8_linear.h"

#include <optional>
#include <stdexcept>

#include "engine/op_timer.h"

namespace fp8scope {

struct Fp8Linear::Cached {
    std::unique_ptr<OperandStorage> x, w;
    std::unique_ptr<OperandStorage> x_apart, w_apart;  // columnwise copies cast apart (made when needed)
    GemmOperand xq, wq;  // the casts of the last training forward
    GemmOperand xc, wc;  // their columnwise copies when cast apart
    bool smoothed = false;  // they read the smoothing scratch, which later linears reuse
};

Fp8Linear::Fp8Linear(Backend& backend, std::vector<LinearInfo> linears)
    : backend_(backend), linears_(std::move(linears)), output_check_(backend), xs_(backend), ws_(backend),
      injector_(backend), watch_(backend), pending_(backend) {
    snapshot_.resize(linears_.size());
    for (std::size_t i = 0; i < linears_.size(); ++i) {
        auto c = std::make_unique<Cached>();
        c->x = backend_.make_operand_storage();
        c->w = backend_.make_operand_storage();
        cached_.push_back(std::move(c));
    }
    dy_storage_ = backend_.make_operand_storage();
    report_slots_.resize(linears_.size() * 6);
    set_recipe(training_recipe("baseline"));
}

Fp8Linear::~Fp8Linear() = default;

void Fp8Linear::set_plan(PrecisionPlan plan) {
    plan_ = std::move(plan);
    for (const TrainingRecipe& recipe : plan_.recipes()) {
        auto& per_linear = delayed_[recipe.name];
        if (per_linear.empty()) per_linear.resize(linears_.size());
        for (std::size_t l = 0; l < per_linear.size(); ++l)
            for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                const Uses u = uses(int(l), o);
                if (u.rowwise->name != recipe.name && u.columnwise->name != recipe.name) continue;
                const auto& r = recipe.operand(o);
                const auto* d = r ? std::get_if<DelayedScaling>(&*r) : nullptr;
                auto& slot = per_linear[l][std::size_t(o)];
                if (!d) slot.reset();
                else if (!slot) slot = backend_.make_amax_history(*d);
            }
    }
    if (defer_) pending_.grow(std::size_t(pending_count()));
}

Fp8Linear::Uses Fp8Linear::uses(int linear, Operand o) const {
    const auto [row, col] = operand_gemms(o);
    return {&plan_.recipe(linear, row), &plan_.recipe(linear, col)};
}

void Fp8Linear::set_capture(CaptureSink* sink, bool operands) {
    sink_ = sink;
    capture_operands_ = sink && operands;
}

AmaxHistory* Fp8Linear::history(int linear, Operand o, const TrainingRecipe& recipe) {
    return delayed_.at(recipe.name)[std::size_t(linear)][std::size_t(o)].get();
}

std::optional<DelayedState> Fp8Linear::read(AmaxHistory* h) const {
    return h ? std::optional(h->read()) : std::nullopt;
}

std::optional<DelayedState> Fp8Linear::delayed_state(int linear, Operand o) const {
    auto it = delayed_.find(uses(linear, o).rowwise->name);
    if (it == delayed_.end()) return std::nullopt;
    const auto& h = it->second[std::size_t(linear)][std::size_t(o)];
    return read(h.get());
}

int Fp8Linear::layer_of(int linear) const { return linears_[std::size_t(linear)].layer; }

// The operand as its GEMMs read it: the rowwise copy and, when asked, the columnwise one.
// `report`: a training cast whose figures go to the sink after the step.
GemmOperand Fp8Linear::cast(Operand o, const TensorDesc& values, const TrainingRecipe& recipe, bool push,
                            bool rowwise, bool columnwise, OperandStorage& storage, int linear, bool report) {
    const auto& r = recipe.operand(o);
    AmaxHistory* h = history(linear, o, recipe);
    CastSpec spec;
    spec.recipe = r ? &*r : nullptr;
    spec.history = h;
    spec.push = push;
    spec.rowwise = rowwise;
    spec.columnwise = columnwise;
    spec.rounding = {seed_, step_, std::uint32_t(linear) << 3 | std::uint32_t(o) << 1};
    OperandScaling scaling{linear, o, {}, std::nullopt};
    if (rowwise != columnwise) scaling.gemm = rowwise ? operand_gemms(o).first : operand_gemms(o).second;
    const std::size_t index = report_slot(scaling);
    CastInfo* slot = &report_slots_[index];
    // A columnwise-only cast has figures to report where it casts the tensor itself (per
    // tensor, 128x128 blocks), not the transpose's own blocks.
    spec.report = report && r && sink_ && (rowwise || columnwise_is_transpose(*r)) ? slot : nullptr;
    if (defer_ && push && h) {
        spec.push = false;
        spec.amax_out = pending_.data() + index;
        pushes_.emplace_back(h, index);
    }
    std::optional<OpTimer> timer;
    if (r) timer.emplace(sink_, backend_, "quantize", layer_of(linear), linear, int(o));
    GemmOperand op = backend_.cast(values, spec, storage);
    timer.reset();
    if (spec.report) reports_.push_back(scaling);
    return op;
}

std::size_t Fp8Linear::report_slot(const OperandScaling& s) const {
    const bool apart = s.gemm && *s.gemm == operand_gemms(s.operand).second;
    return (apart ? linears_.size() * 3 : 0) + std::size_t(s.linear) * 3 + std::size_t(s.operand);
}

void Fp8Linear::cast_copies(Operand o, const TensorDesc& values, bool training, OperandStorage& storage,
                            std::unique_ptr<OperandStorage>& apart_storage, int linear, GemmOperand& rowwise,
                            GemmOperand& columnwise) {
    // Evaluation casts only the rowwise copy and leaves the histories as they are.
    const Uses u = uses(linear, o);
    if (training) watch(o, values, *u.rowwise, linear);
    if (!u.split() || !training) {
        rowwise = cast(o, values, *u.rowwise, training, true, training, storage, linear, training);
        return;
    }
    if (!apart_storage) apart_storage = backend_.make_operand_storage();
    rowwise = cast(o, values, *u.rowwise, true, true, false, storage, linear, true);
    columnwise = cast(o, values, *u.columnwise, true, false, true, *apart_storage, linear, true);
}

// The operand as its first GEMM reads it, blocked as that GEMM's rowwise copy is.
void Fp8Linear::watch(Operand o, const TensorDesc& values, const TrainingRecipe& recipe, int linear) {
    const LinearInfo& info = linears_[std::size_t(linear)];
    NonFiniteSite site{std::int64_t(step_), info.layer, linear, info.name, recipe.name, operand_gemms(o).first, o,
                       values.rows, values.cols, 0, 0};
    if (const auto& r = recipe.operand(o)) {
        const GemmOperand blocked = operand_of(*r);
        site.block_rows = blocked.block_rows, site.block_cols = blocked.block_cols;
    }
    OpTimer timer(sink_, backend_, "nonfinite", info.layer, linear, int(o));  // its kernel is the step's too
    watch_.check(values, std::move(site));
}

void Fp8Linear::flush_reports() {
    if (reports_.empty()) return;
    backend_.synchronize();
    for (OperandScaling& s : reports_) {
        s.cast = report_slots_[report_slot(s)];
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
    OpTimer timer(sink_, backend_, "capture", layer_of(linear), linear, int(o));
    sink_->on_operand(OperandCapture{linear, g, o, values, &backend_, plan_.quantizer(linear, g, o),
                                     state ? &*state : nullptr, transposed_repeat});
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

TensorDesc Fp8Linear::cast_input(int linear, Operand o, DeviceBuffer<float>& scratch, const TensorDesc& in,
                                  const float* smooth, bool inverse, bool training) {
    const TensorDesc s = smoothed(scratch, in, smooth, inverse);
    if (!training || injector_.empty()) return s;
    OpTimer timer(sink_, backend_, "inject", layer_of(linear), linear, int(o));
    return injector_.apply(linear, o, s, std::int64_t(step_));
}

void Fp8Linear::forward(int linear, ActPtr x, const float* w, const float* b, ActPtr y, std::int64_t N,
                        const float* smooth, bool training, const GemmEpilogue& epilogue) {
    const auto& info = linears_[std::size_t(linear)];
    const std::int64_t K = info.in_features, M = info.out_features;
    const Device dev = backend_.device();
    std::optional<OpTimer> timer;
    if (smooth) timer.emplace(sink_, backend_, "smooth_swiglu", info.layer, linear);
    const TensorDesc X = cast_input(linear, Operand::X, xs_, TensorDesc::of(x, N, K, dev), smooth, false, training);
    const TensorDesc W = cast_input(linear, Operand::W, ws_, TensorDesc::of(w, M, K, dev), smooth, true, training);
    timer.reset();

    if (training) {
        auto& snap = snapshot_[std::size_t(linear)];
        snap = {};
        if (capture_operands_) {
            const Uses ux = uses(linear, Operand::X), uw = uses(linear, Operand::W);
            snap[0] = read(history(linear, Operand::X, *ux.rowwise));
            snap[1] = read(history(linear, Operand::W, *uw.rowwise));
            snap[2] = ux.split() ? read(history(linear, Operand::X, *ux.columnwise)) : snap[0];
            snap[3] = uw.split() ? read(history(linear, Operand::W, *uw.columnwise)) : snap[1];
            capture(linear, Gemm::Fprop, Operand::X, X, snap[0]);
            capture(linear, Gemm::Fprop, Operand::W, W, snap[1]);
        }
    }
    Cached& c = *cached_[std::size_t(linear)];
    cast_copies(Operand::X, X, training, *c.x, c.x_apart, linear, c.xq, c.xc);
    cast_copies(Operand::W, W, training, *c.w, c.w_apart, linear, c.wq, c.wc);
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
    const Uses ux = uses(linear, Operand::X), uw = uses(linear, Operand::W), udy = uses(linear, Operand::DY);
    const bool redo_x = !ux.columnwise->x && c.smoothed, redo_w = !uw.columnwise->w && c.smoothed;
    const TensorDesc X = redo_x || capture_operands_
                             ? cast_input(linear, Operand::X, xs_, TensorDesc::of(x, N, K, dev), smooth, false, true)
                             : TensorDesc{};
    const TensorDesc W = redo_w || capture_operands_
                             ? cast_input(linear, Operand::W, ws_, TensorDesc::of(w, M, K, dev), smooth, true, true)
                             : TensorDesc{};
    CastSpec columnwise_only;
    columnwise_only.rowwise = false;
    columnwise_only.columnwise = true;
    GemmOperand& Xop = ux.split() ? c.xc : c.xq;
    GemmOperand& Wop = uw.split() ? c.wc : c.wq;
    if (redo_x) Xop = backend_.cast(X, columnwise_only, ux.split() ? *c.x_apart : *c.x);
    if (redo_w) Wop = backend_.cast(W, columnwise_only, uw.split() ? *c.w_apart : *c.w);

    // dgrad: dX (N,K) = dY (N,M) W (M,K); contraction over M. The bias gradient reads dy
    // as it is: an injection scales what the GEMMs read.
    const TensorDesc dY = cast_input(linear, Operand::DY, xs_, TensorDesc::of(dy, N, M, dev), nullptr, false, true);
    const std::optional<DelayedState> snap_dy =
        capture_operands_ ? read(history(linear, Operand::DY, *udy.rowwise)) : std::nullopt;
    const std::optional<DelayedState> snap_dyc =
        capture_operands_ && udy.split() ? read(history(linear, Operand::DY, *udy.columnwise)) : snap_dy;
    auto transposed = [](TensorDesc t) {
        std::swap(t.rows, t.cols);
        t.transposed = !t.transposed;
        return t;
    };
    if (capture_operands_) capture(linear, Gemm::Dgrad, Operand::DY, dY, snap_dy);
    GemmOperand dYop, dYcol;
    cast_copies(Operand::DY, dY, true, *dy_storage_, dy_apart_, linear, dYop, dYcol);
    const GemmOperand& dYc = udy.split() ? dYcol : dYop;
    if (capture_operands_) capture(linear, Gemm::Dgrad, Operand::W, transposed(W), snap[3], true);
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
        capture(linear, Gemm::Wgrad, Operand::DY, transposed(dY), snap_dyc, true);
        capture(linear, Gemm::Wgrad, Operand::X, transposed(X), snap[2], true);
    }
    OpTimer wgrad(sink_, backend_, "wgrad", info.layer, linear);
    const TensorDesc dW = TensorDesc::of(dw, M, K, dev);
    backend_.gemm(dYc, Copy::Columnwise, Xop, Copy::Columnwise, dW, nullptr, false, {});
    if (capture_operands_)
        output_check_.check(*sink_, info.layer, linear, Gemm::Wgrad, dYc, dY, Copy::Columnwise, Xop, X,
                            Copy::Columnwise, dW, nullptr, {});
    if (smooth) backend_.scale_columns(dW, dW, smooth, true);  // W' = W diag(1/s): dW = dW' diag(1/s)
    if (db) backend_.bias_backward(db, TensorDesc::of(dy, N, M, dev));
}

}  // namespace fp8scope
