// The CUDA backend's casts and GEMMs (design in cuda_backend.h): the operand storage, the
// delayed-scaling history in device memory, cast(), gemm() with its emulated path, and
// the unquantized output head.
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <variant>

#include "cuda/cast/fp4_train.h"
#include "cuda/cast/quantize.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_backend_kernels.h"
#include "cuda/cuda_backend_lane.h"
#include "cuda/cuda_backend_mirror.h"
#include "cuda/gemm/gemm.h"
#include "cuda/ops/ops.h"
#include "cuda/runtime/check.h"

namespace fp8scope {
namespace {

using cuda::bf16;

// The buffers of one cast operand, grown on demand.
struct CudaStorage final : OperandStorage {
    explicit CudaStorage(CudaBackend& b)
        : rowwise(b), columnwise(b), rowwise_scale_inv(b), columnwise_scale_inv(b), rowwise_e8m0(b),
          columnwise_e8m0(b), stats(b), bf16_copy(b), fp4_scalars(b) {}
    CudaBackend::Scratch rowwise, columnwise;                        // codes (R,C), (C,R)
    CudaBackend::Scratch rowwise_scale_inv, columnwise_scale_inv;    // float32 grids
    CudaBackend::Scratch rowwise_e8m0, columnwise_e8m0;              // MX only
    CudaBackend::Scratch stats;                                      // cuda::CastStats
    CudaBackend::Scratch bf16_copy;                                  // F32 x in BF16 (no recipe)
    CudaBackend::Scratch fp4_scalars;                                // cuda::Fp4Scalars
};

// Delayed scaling's state in device memory (quantize.h's layout).
class CudaAmaxHistory final : public AmaxHistory {
public:
    CudaAmaxHistory(CudaBackend& b, const DelayedScaling& r) : backend_(b), recipe_(r), state_(b) {
        cuda::delayed_state_write(state_.grow(cuda::delayed_state_bytes(r)), DelayedState(r), backend_.stream());
    }
    const DelayedScaling& recipe() const override { return recipe_; }
    DelayedState read() const override {
        return cuda::delayed_state_read(state_.data(), recipe_, backend_.stream());
    }
    // The history and scale of `s` under this history's own recipe (its ring length).
    void restore(const DelayedState& s) override {
        DelayedState mine(recipe_);
        mine.restore(s.history(), s.scale());
        cuda::delayed_state_write(state_.data(), mine, backend_.stream());
    }
    void push(const float* amax) override { cuda::delayed_push(state_.data(), recipe_, amax, backend_.stream()); }
    void* state() const { return state_.data(); }

private:
    CudaBackend& backend_;
    DelayedScaling recipe_;
    CudaBackend::Scratch state_;
};

DType code_type(Format f) { return f == Format::E4M3 ? DType::E4M3 : DType::E5M2; }

// The block of one copy (rows, cols) of an operand: per-tensor is one block of the copy.
cuda::QuantizedInput quantized(const GemmOperand& op, const TensorDesc& data, const TensorDesc& scale_inv) {
    cuda::QuantizedInput q;
    q.codes = static_cast<const std::uint8_t*>(data.data);
    q.scale_inv = static_cast<const float*>(scale_inv.data);
    q.format = op.format;
    q.scale_transposed = scale_inv.transposed;
    q.rows = data.rows;
    q.cols = data.cols;
    if (op.mode == ScalingMode::PerTensor) q.block_rows = std::max<std::int64_t>(1, data.rows), q.block_cols = std::max<std::int64_t>(1, data.cols);
    else q.block_rows = op.block_rows, q.block_cols = op.block_cols;
    return q;
}

// Modes Hopper has no tensor cores for: their GEMMs are emulated in BF16.
bool no_tensor_cores(ScalingMode m) {
    return m == ScalingMode::MX || m == ScalingMode::NVFP4 || m == ScalingMode::MXFP4;
}

// The largest power of two up to 256 dividing the address (what cuBLASLt's plans depend on).
std::int64_t alignment(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::int64_t al = 256;
    while (al > 1 && a % std::uintptr_t(al) != 0) al /= 2;
    return al;
}

}  // namespace

std::unique_ptr<OperandStorage> CudaBackend::make_operand_storage() { return std::make_unique<CudaStorage>(*this); }

std::unique_ptr<AmaxHistory> CudaBackend::make_amax_history(const DelayedScaling& recipe) {
    return std::make_unique<CudaAmaxHistory>(*this, recipe);
}

// --- the cast ----------------------------------------------------------------------------

GemmOperand CudaBackend::cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) {
    auto& s = static_cast<CudaStorage&>(storage);
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda cast: tensor is ") + dtype_name(x.dtype));
    if (!spec.recipe) {  // BF16 is the GEMM's own type
        GemmOperand op;
        TensorDesc v = x;
        if (x.dtype == DType::F32) {  // a weight: its BF16 copy (same layout)
            v.data = const_cast<bf16*>(bf16_weight(static_cast<const float*>(x.data), x.numel(), s.bf16_copy));
            v.dtype = DType::BF16;
        }
        op.rowwise = v;
        op.columnwise = transposed_view(v);
        return op;
    }
    if (x.transposed) throw std::logic_error("cuda cast: a recipe casts row-major tensors, not transposed views");

    const Recipe& r = *spec.recipe;
    const std::int64_t R = x.rows, C = x.cols;
    if (is_fp4(r)) return cast_fp4(x, spec, storage);
    const cuda::ScaleGrid rg = cuda::scale_grid(r, R, C), cg = cuda::scale_grid(r, C, R);
    GemmOperand op = operand_of(r);  // block shapes as in rg, which checked them
    const bool mx = op.mode == ScalingMode::MX;
    const DType codes = code_type(op.format);

    cuda::CastTarget t;
    if (spec.rowwise) {
        t.rowwise = s.rowwise.grow_as<std::uint8_t>(std::size_t(R * C));
        t.rowwise_scale_inv = s.rowwise_scale_inv.grow_as<float>(std::size_t(rg.size()));
        if (mx) t.rowwise_e8m0 = s.rowwise_e8m0.grow_as<std::uint8_t>(std::size_t(rg.size()));
        op.rowwise = TensorDesc{t.rowwise, codes, R, C, Device::CUDA, false};
        op.rowwise_scale_inv =
            TensorDesc{t.rowwise_scale_inv, DType::F32, rg.rows, rg.cols, Device::CUDA, rg.transposed};
    }
    if (spec.columnwise) {
        t.columnwise = s.columnwise.grow_as<std::uint8_t>(std::size_t(R * C));
        t.columnwise_scale_inv = s.columnwise_scale_inv.grow_as<float>(std::size_t(cg.size()));
        if (mx) t.columnwise_e8m0 = s.columnwise_e8m0.grow_as<std::uint8_t>(std::size_t(cg.size()));
        op.columnwise = TensorDesc{t.columnwise, codes, C, R, Device::CUDA, false};
        op.columnwise_scale_inv =
            TensorDesc{t.columnwise_scale_inv, DType::F32, cg.rows, cg.cols, Device::CUDA, cg.transposed};
    }
    t.stats = spec.report ? report_slot() : s.stats.grow_as<cuda::CastStats>(1);
    void* state = spec.history && std::holds_alternative<DelayedScaling>(r)
                      ? static_cast<CudaAmaxHistory*>(spec.history)->state()
                      : nullptr;
    cuda::cast(cuda::CastInput{x.data, x.dtype, R, C}, r, t, stream(), state, spec.push);
    cast_done(spec, t.stats);
    return op;
}

// FP4: BF16 copies of decode(q) * s_b and each copy's S_dec (fp4_train.h), which the GEMM
// takes as alpha.
GemmOperand CudaBackend::cast_fp4(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) {
    auto& s = static_cast<CudaStorage&>(storage);
    const std::int64_t R = x.rows, C = x.cols;
    GemmOperand op = operand_of(*spec.recipe);
    cuda::Fp4Copies c;
    c.stats = spec.report ? report_slot() : s.stats.grow_as<cuda::CastStats>(1);
    c.scalars = s.fp4_scalars.grow_as<cuda::Fp4Scalars>(1);
    if (spec.rowwise) {
        c.rowwise = s.rowwise.grow_as<bf16>(std::size_t(R * C));
        op.rowwise = TensorDesc{c.rowwise, DType::BF16, R, C, Device::CUDA, false};
        op.rowwise_tensor_scale_inv = &c.scalars->row_tensor_scale_inv;
    }
    if (spec.columnwise) {
        c.columnwise = s.columnwise.grow_as<bf16>(std::size_t(R * C));
        op.columnwise = TensorDesc{c.columnwise, DType::BF16, C, R, Device::CUDA, false};
        op.columnwise_tensor_scale_inv = &c.scalars->col_tensor_scale_inv;
    }
    cuda::cast_fp4_copies(cuda::CastInput{x.data, x.dtype, R, C}, *spec.recipe, spec.rounding, c, stream());
    cast_done(spec, c.stats);
    return op;
}

// After a cast into `stats`: its amax to spec.amax_out, its report queued.
void CudaBackend::cast_done(const CastSpec& spec, cuda::CastStats* stats) {
    if (spec.amax_out)
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(spec.amax_out, &stats->amax, sizeof(float), cudaMemcpyDeviceToDevice, stream()));
    if (spec.report) lane().pending_reports.push_back(spec.report);  // the slot report_slot() handed out
}

const bf16* CudaBackend::bf16_weight(const float* w, std::int64_t n, Scratch& scratch) {
    if (const bf16* copy = mirror_->find(w, n)) {
        scratch.reset();  // no conversion here while the copy stays current
        return copy;
    }
    auto* out = scratch.grow_as<bf16>(std::size_t(n));
    cuda::f32_to_bf16(out, w, n, stream());
    return out;
}

// --- GEMMs -------------------------------------------------------------------------------

namespace {

// The chosen copy of an operand as a BF16 GEMM input: itself when it is BF16, else
// dequantized (codes) or rounded (float32) to BF16 in `scratch`.
cuda::GemmInput bf16_input(const GemmOperand& op, Copy copy, CudaBackend::Scratch& scratch, cudaStream_t stream) {
    const bool rowwise = copy == Copy::Rowwise;
    const TensorDesc& data = rowwise ? op.rowwise : op.columnwise;
    cuda::GemmInput in;
    in.dtype = DType::BF16;
    in.transposed = data.transposed;
    in.tensor_scale_inv = rowwise ? op.rowwise_tensor_scale_inv : op.columnwise_tensor_scale_inv;
    if (data.dtype == DType::BF16) {
        in.data = data.data;
        return in;
    }
    auto* out = scratch.grow_as<bf16>(std::size_t(data.numel()));
    in.data = out;
    if (data.dtype == DType::F32) {  // an emulated copy or a float32 operand: same layout
        cuda::f32_to_bf16(out, static_cast<const float*>(data.data), data.numel(), stream);
        return in;
    }
    cuda::dequantize(quantized(op, data, rowwise ? op.rowwise_scale_inv : op.columnwise_scale_inv), out, DType::BF16,
                     stream);
    return in;
}

}  // namespace

void CudaBackend::gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                       const float* bias, bool accumulate, const GemmEpilogue& epi) {
    const TensorDesc& A = ca == Copy::Rowwise ? a.rowwise : a.columnwise;  // (m,k)
    const TensorDesc& B = cb == Copy::Rowwise ? b.rowwise : b.columnwise;  // (n,k)
    if (!A.data || !B.data || A.cols != B.cols || out.rows != A.rows || out.cols != B.rows || out.transposed)
        throw std::logic_error("cuda gemm: operands (" + std::to_string(A.rows) + "x" + std::to_string(A.cols) + ", " +
                               std::to_string(B.rows) + "x" + std::to_string(B.cols) + ") do not give " +
                               std::to_string(out.rows) + "x" + std::to_string(out.cols));
    if (epi.kind == GemmEpilogue::Kind::None) return run_gemm(a, ca, b, cb, out, bias, accumulate, epi);
    if (epi.aux.dtype != out.dtype)
        throw std::logic_error("cuda gemm: the epilogue's aux must have the output's type");
    // GELU's gradient in cuBLASLt's epilogue is slower than a pass of its own (gemm.h).
    if (epi.kind == GemmEpilogue::Kind::GeluBackward)
        return gemm_then_epilogue(a, ca, b, cb, out, bias, accumulate, epi);
    // GELU in cuBLASLt's epilogue, else (once refused, for good) a pass of its own.
    const Lane::GemmKey key = {A.rows, B.rows, A.cols, std::int64_t(a.mode), std::int64_t(A.dtype),
                               std::int64_t(b.mode), std::int64_t(B.dtype), std::int64_t(out.dtype),
                               std::int64_t(epi.kind), bias != nullptr};
    if (!lane().unfused.contains(key)) {
        try {
            return run_gemm(a, ca, b, cb, out, bias, accumulate, epi);
        } catch (const cuda::GemmUnsupported&) {
            lane().unfused.insert(key);
        }
    }
    gemm_then_epilogue(a, ca, b, cb, out, bias, accumulate, epi);
}

// The problem's key holds everything GemmRunner::check and cuBLASLt's heuristic decide on.
void CudaBackend::run_gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                           const float* bias, bool accumulate, const GemmEpilogue& epi) {
    const TensorDesc& A = ca == Copy::Rowwise ? a.rowwise : a.columnwise;
    const TensorDesc& B = cb == Copy::Rowwise ? b.rowwise : b.columnwise;
    cuda::GemmArgs g;
    g.m = A.rows, g.n = B.rows, g.k = A.cols;
    g.out = out.data;
    g.out_dtype = out.dtype;
    g.bias = bias;
    g.accumulate = accumulate;
    if (epi.kind == GemmEpilogue::Kind::Gelu) g.gelu = cuda::GemmGelu::Forward, g.gelu_aux = epi.aux.ptr;

    Lane& l = lane();
    const Lane::GemmKey key = {
        g.m, g.n, g.k, std::int64_t(out.dtype), bias != nullptr, accumulate,
        std::int64_t(a.mode), std::int64_t(A.dtype), a.block_rows, a.block_cols, A.transposed, a.emulated,
        std::int64_t(b.mode), std::int64_t(B.dtype), b.block_rows, b.block_cols, B.transposed, b.emulated,
        alignment(A.data) | alignment(B.data) << 16,
        alignment(out.data) | alignment(bias) << 16 | alignment(epi.aux.ptr) << 32, std::int64_t(epi.kind)};
    // Native until cuBLASLt refuses the problem once; from then on it is emulated without
    // an exception. MX and FP4 operands and what GemmRunner::check rules out go straight there.
    auto it = l.emulate.find(key);
    if (it == l.emulate.end() || !it->second) {
        if (!no_tensor_cores(a.mode) && !no_tensor_cores(b.mode)) {
            try {
                g.a = cuda::gemm_input(a, ca);
                g.b = cuda::gemm_input(b, cb);
                if (std::string why = cuda::GemmRunner::check(g); why.empty()) {
                    l.runner->gemm(g);
                    if (it == l.emulate.end()) l.emulate.emplace(key, false);
                    return;
                } else if (epi.kind != GemmEpilogue::Kind::None) {
                    throw cuda::GemmUnsupported(why);
                }
            } catch (const cuda::GemmUnsupported&) {
                // No kernel for it: emulated below. With an epilogue, the caller tries the
                // native GEMM without it first.
                if (epi.kind != GemmEpilogue::Kind::None) throw;
            }
        }
        l.emulate.insert_or_assign(key, true);
    }
    // Emulated: both copies as BF16 (exact for FP8 codes times power-of-two scales, and
    // for FP4 copies, whose tensor scales alpha takes).
    g.a = bf16_input(a, ca, *l.emulated_a, l.stream);
    g.b = bf16_input(b, cb, *l.emulated_b, l.stream);
    l.runner->gemm(g);
    ++l.emulated_gemms;
}

// --- the output head (unquantized) ----------------------------------------------------------

void CudaBackend::matmul_forward(ActPtr out, ActPtr inp, const float* weight, const float* bias, std::int64_t N,
                                 std::int64_t K, std::int64_t M) {
    if (out.dtype != DType::BF16 || inp.dtype != DType::BF16)
        throw std::logic_error("cuda matmul_forward: activations must be bf16");
    const bf16* w = bf16_weight(weight, M * K, *lane().head_weight);
    cuda::GemmArgs g;
    g.m = N, g.n = M, g.k = K;
    g.a = {inp.ptr, DType::BF16};
    g.b = {w, DType::BF16};
    g.out = out.ptr;
    g.out_dtype = DType::BF16;
    g.bias = bias;
    lane().runner->gemm(g);
}

void CudaBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                  const float* weight, std::int64_t N, std::int64_t K, std::int64_t M) {
    if (dout.dtype != DType::BF16 || inp.dtype != DType::BF16 || (dinp && dinp.dtype != DType::BF16))
        throw std::logic_error("cuda matmul_backward: activations must be bf16");
    if (dinp) {  // dinp (N,K) = dout (N,M) weight (M,K): B = weight^T (K,M), a transposed view
        const bf16* w = bf16_weight(weight, M * K, *lane().head_weight);
        cuda::GemmArgs g;
        g.m = N, g.n = K, g.k = M;
        g.a = {dout.ptr, DType::BF16};
        g.b = {w, DType::BF16};
        g.b.transposed = true;
        g.out = dinp.ptr;
        g.out_dtype = DType::BF16;
        lane().runner->gemm(g);
    }
    if (dweight) {  // dweight (M,K) = dout^T (M,N) inp (N,K): both read as transposed views
        cuda::GemmArgs g;
        g.m = M, g.n = K, g.k = N;
        g.a = {dout.ptr, DType::BF16};
        g.a.transposed = true;
        g.b = {inp.ptr, DType::BF16};
        g.b.transposed = true;
        g.out = dweight;
        g.out_dtype = DType::F32;
        lane().runner->gemm(g);
    }
    if (dbias) bias_backward(dbias, TensorDesc::of(dout, N, M, Device::CUDA));
}

}  // namespace fp8scope
