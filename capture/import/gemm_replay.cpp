// Casts and GEMMs of an imported linear, as Fp8Linear runs them (core/engine/fp8_linear.cpp).
#include "gemm_replay.h"

#include <algorithm>

namespace fp8scope::import {
namespace {

// Passes the GEMM outputs on; the import's own op timings are not the run's.
struct OutputsOnly : CaptureSink {
    explicit OutputsOnly(CaptureSink& to) : to(to) {}
    void on_operand(const OperandCapture&) override {}
    void on_op(const OpTiming&) override {}
    void on_gemm_output(const GemmOutputCapture& c) override { to.on_gemm_output(c); }
    CaptureSink& to;
};

}  // namespace

GemmReplay::GemmReplay(Backend& backend) : backend_(backend), check_(backend), out_(backend) {
    for (auto& s : storage_) s = backend.make_operand_storage();
}

GemmReplay::~GemmReplay() = default;

GemmOperand GemmReplay::cast(const TensorDesc& values, const Recipe* q, Copy copy, const DelayedState* state,
                             std::size_t slot) {
    CastSpec spec;
    spec.recipe = q;
    spec.rowwise = copy == Copy::Rowwise;
    spec.columnwise = copy == Copy::Columnwise;
    if (q && state) {
        auto& h = history_[slot];  // kept until the next step: a device's cast reads it later
        h = backend_.make_amax_history(std::get<DelayedScaling>(*q));
        h->restore(*state);
        spec.history = h.get();  // its scale; the import pushes the step's amax itself
    }
    return backend_.cast(values, spec, *storage_[slot]);
}

void GemmReplay::run(CaptureSink& sink, int layer, int linear, const PrecisionPlan& plan,
                     const std::array<TensorDesc, 3>& v, const DelayedOf& delayed) {
    // Each operand's two copies, as the GEMMs that read them want them cast.
    std::array<GemmOperand, 6> copies;
    for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
        const auto [first, second] = operand_gemms(o);
        const auto i = std::size_t(o);
        for (const auto& [g, copy] : {std::pair{first, Copy::Rowwise}, std::pair{second, Copy::Columnwise}}) {
            const Recipe* q = plan.quantizer(linear, g, o);
            const DelayedState* state = q && std::holds_alternative<DelayedScaling>(*q) ? delayed(o, *q) : nullptr;
            copies[2 * i + std::size_t(copy)] = cast(v[i], q, copy, state, 2 * i + std::size_t(copy));
        }
    }
    auto copy_of = [&](Operand o, Copy c) -> const GemmOperand& { return copies[2 * std::size_t(o) + std::size_t(c)]; };
    const std::int64_t N = v[std::size_t(Operand::X)].rows, K = v[std::size_t(Operand::X)].cols,
                       M = v[std::size_t(Operand::W)].rows;
    float* out = out_.grow(std::size_t(std::max({N * M, N * K, M * K})));
    OutputsOnly outputs(sink);
    struct G {
        Gemm gemm;
        Operand a;
        Copy ca;
        Operand b;
        Copy cb;
        std::int64_t rows, cols;
    };
    //   fprop  Y (N,M) = X W^T;  dgrad dX (N,K) = dY W;  wgrad dW (M,K) = dY^T X
    for (const G& g : {G{Gemm::Fprop, Operand::X, Copy::Rowwise, Operand::W, Copy::Rowwise, N, M},
                       G{Gemm::Dgrad, Operand::DY, Copy::Rowwise, Operand::W, Copy::Columnwise, N, K},
                       G{Gemm::Wgrad, Operand::DY, Copy::Columnwise, Operand::X, Copy::Columnwise, M, K}}) {
        const TensorDesc o = TensorDesc::of(out, g.rows, g.cols, backend_.device());
        backend_.gemm(copy_of(g.a, g.ca), g.ca, copy_of(g.b, g.cb), g.cb, o, nullptr, false, {});
        check_.check(outputs, layer, linear, g.gemm, copy_of(g.a, g.ca), v[std::size_t(g.a)], g.ca,
                     copy_of(g.b, g.cb), v[std::size_t(g.b)], g.cb, o, nullptr, {});
    }
}

}  // namespace fp8scope::import
