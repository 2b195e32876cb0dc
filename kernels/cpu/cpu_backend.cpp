// The CPU backend: the Backend interface over the CPU ops (kernels/cpu/ops), the
// fake-quantize cast (kernels/cpu/quantize.h) and the fused analysis.
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <stdexcept>
#include <vector>

#include "cpu/analysis.h"
#include "cpu/blas.h"
#include "cpu/chunks.h"
#include "cpu/cpu_info.h"
#include "io/half.h"
#include "cpu/ops/activation.h"
#include "cpu/ops/attention.h"
#include "cpu/ops/embedding.h"
#include "cpu/ops/matmul.h"
#include "cpu/ops/norm.h"
#include "cpu/ops/softmax_ce.h"
#include "cpu/quantize.h"
#include "cpu/simd.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

float* f32(const TensorDesc& t) {
    if (t.dtype != DType::F32) throw std::logic_error(std::string("cpu backend: tensor is ") + dtype_name(t.dtype));
    return static_cast<float*>(t.data);
}

MatrixView view(const TensorDesc& t) { return MatrixView{f32(t), t.rows, t.cols}; }

TensorDesc transposed_view(const TensorDesc& t) {
    TensorDesc v = t;
    v.rows = t.cols;
    v.cols = t.rows;
    v.transposed = !t.transposed;
    return v;
}

// The values of t, laid out row-major: t itself, or its transpose materialized in `tmp`.
MatrixView contiguous(const TensorDesc& t, std::vector<float>& tmp) {
    if (!t.transposed) return view(t);
    tmp.resize(std::size_t(t.numel()));
    ops::transpose(tmp.data(), f32(t), t.cols, t.rows);
    return MatrixView{tmp.data(), t.rows, t.cols};
}

struct CpuStorage final : OperandStorage {
    std::vector<float> rowwise, columnwise, transposed;  // cast copies; x^T before its cast
};

class CpuAmaxHistory final : public AmaxHistory {
public:
    explicit CpuAmaxHistory(const DelayedScaling& r) : state(r) {}
    const DelayedScaling& recipe() const override { return state.recipe(); }
    DelayedState read() const override { return state; }
    void restore(const DelayedState& s) override { state.restore(s.history(), s.scale()); }
    void push(const float* amax) override { state.push(*amax); }
    DelayedState state;
};

float* grow(std::vector<float>& v, std::int64_t n) {
    if (v.size() < std::size_t(n)) v.resize(std::size_t(n));
    return v.data();
}

}  // namespace

std::string blas_description() { return blas::description(); }

CpuBackend::CpuBackend(int threads) : threads_(threads > 0 ? threads : 0) {
    blas::init();
    set_default_threads(threads_);
    ops::set_blas_threads(threads_);
}

std::string CpuBackend::describe() const {
    return "cpu: " + cpu_model() + ", " + std::to_string(default_threads()) + " threads, " + isa_name(cpu_isa()) +
           " kernels, " + blas_description();
}

std::string cpu_description() {
    return "cpu: " + cpu_model() + " (" + cpu_features() + "; " + isa_name(cpu_isa()) + " kernels), " +
           blas_description();
}

void* CpuBackend::allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = std::calloc(1, bytes);
    if (!p) throw std::bad_alloc();
    return p;
}

void CpuBackend::release(void* p) { std::free(p); }
void CpuBackend::copy_to_host(void* host, const void* src, std::size_t bytes) { if (bytes) std::memcpy(host, src, bytes); }
void CpuBackend::copy_from_host(void* dst, const void* host, std::size_t bytes) { if (bytes) std::memcpy(dst, host, bytes); }
void CpuBackend::copy(void* dst, const void* src, std::size_t bytes) { if (bytes) std::memmove(dst, src, bytes); }
void CpuBackend::fill_zero(void* p, std::size_t bytes) { if (bytes) std::memset(p, 0, bytes); }

void CpuBackend::convert(void* out, DType to, const void* in, DType from, std::int64_t n) {
    if (from == DType::F32 && to == DType::BF16) {
        auto* o = static_cast<std::uint16_t*>(out);
        const auto* i = static_cast<const float*>(in);
        for (std::int64_t k = 0; k < n; ++k) o[k] = float_to_bf16(i[k]);
    } else if (from == DType::BF16 && to == DType::F32) {
        auto* o = static_cast<float*>(out);
        const auto* i = static_cast<const std::uint16_t*>(in);
        for (std::int64_t k = 0; k < n; ++k) o[k] = bf16_to_float(i[k]);
    } else {
        throw std::logic_error(std::string("cpu convert: ") + dtype_name(from) + " to " + dtype_name(to));
    }
}

// --- layer ops ---------------------------------------------------------------------

void CpuBackend::embedding_forward(ActPtr out, const std::int32_t* tokens, const float* wte, const float* wpe, int B,
                                   int T, int C) {
    ops::embedding_forward(out.f32(), tokens, wte, wpe, B, T, C);
}

void CpuBackend::embedding_backward(float* dwte, float* dwpe, ActPtr dout, const std::int32_t* tokens, int B, int T,
                                    int C) {
    ops::embedding_backward(dwte, dwpe, dout.f32(), tokens, B, T, C);
}

void CpuBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ActPtr inp, const float* weight,
                                   const float* bias, std::int64_t N, int C) {
    ops::layernorm_forward(out.f32(), mean, rstd, inp.f32(), weight, bias, N, C);
}

void CpuBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                    const float* weight, const float* mean, const float* rstd, std::int64_t N, int C) {
    ops::layernorm_backward(dinp.f32(), dweight, dbias, dout.f32(), inp.f32(), weight, mean, rstd, N, C);
}

void CpuBackend::rmsnorm_forward(ActPtr out, float* rstd, ActPtr inp, const float* weight, std::int64_t N, int C) {
    ops::rmsnorm_forward(out.f32(), rstd, inp.f32(), weight, N, C);
}

void CpuBackend::rmsnorm_backward(ActPtr dinp, float* dweight, ActPtr dout, ActPtr inp, const float* weight,
                                  const float* rstd, std::int64_t N, int C) {
    ops::rmsnorm_backward(dinp.f32(), dweight, dout.f32(), inp.f32(), weight, rstd, N, C);
}

std::int64_t CpuBackend::attention_saved(int B, int T, int NH) const { return std::int64_t(B) * NH * T * T; }

void CpuBackend::attention_forward(ActPtr out, ActPtr att, ActPtr qkv, int B, int T, int C, int NH) {
    ops::attention_forward(out.f32(), att.f32(), qkv.f32(), B, T, C, NH);
}

void CpuBackend::attention_backward(ActPtr dqkv, ActPtr dout, ActPtr qkv, ActPtr /*out*/, ActPtr att, int B, int T,
                                    int C, int NH) {
    ops::attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), att.f32(), B, T, C, NH);
}

void CpuBackend::gelu_forward(ActPtr out, ActPtr inp, std::int64_t n) { ops::gelu_forward(out.f32(), inp.f32(), n); }

void CpuBackend::gelu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t n) {
    ops::gelu_backward(dinp.f32(), inp.f32(), dout.f32(), n);
}

void CpuBackend::swiglu_forward(ActPtr out, ActPtr inp, std::int64_t N, int H) {
    ops::swiglu_forward(out.f32(), inp.f32(), N, H);
}

void CpuBackend::swiglu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t N, int H) {
    ops::swiglu_backward(dinp.f32(), inp.f32(), dout.f32(), N, H);
}

void CpuBackend::smooth_swiglu_scales(float* scales, ActPtr h, std::int64_t N, int H) {
    ops::smooth_swiglu_scales(scales, h.f32(), N, H);
}

void CpuBackend::scale_columns(const TensorDesc& out, const TensorDesc& in, const float* s, bool inverse) {
    float* o = f32(out);
    const float* x = f32(in);
    const std::int64_t cols = in.cols;
    parallel_for(in.rows, 16, 0, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = 0; c < cols; ++c)
                o[r * cols + c] = inverse ? x[r * cols + c] / s[c] : x[r * cols + c] * s[c];
    });
}

void CpuBackend::add(ActPtr out, ActPtr a, ActPtr b, std::int64_t n) {
    float* o = out.f32();
    const float* x = a.f32();
    const float* y = b.f32();
    parallel_for(n, 4096, 0, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) o[i] = x[i] + y[i];
    });
}

void CpuBackend::softmax_ce_forward(ActPtr probs, float* losses, ActPtr logits, const std::int32_t* targets,
                                    std::int64_t N, int V) {
    ops::softmax_ce_forward(probs.f32(), losses, logits.f32(), targets, N, V);
}

float CpuBackend::mean_loss(const float* losses, std::int64_t N) {
    double total = 0;
    for (std::int64_t n = 0; n < N; ++n) total += losses[n];
    return float(total / double(N));
}

void CpuBackend::softmax_ce_backward(ActPtr dlogits, ActPtr probs, const std::int32_t* targets, std::int64_t N,
                                     int V, std::int64_t mean_over) {
    ops::softmax_ce_backward(dlogits.f32(), probs.f32(), targets, N, V, mean_over);
}

// --- GEMMs ---------------------------------------------------------------------------

void CpuBackend::matmul_forward(ActPtr out, ActPtr inp, const float* weight, const float* bias, std::int64_t N,
                                std::int64_t K, std::int64_t M) {
    ops::matmul_forward(out.f32(), inp.f32(), weight, bias, N, K, M);
}

void CpuBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                 const float* weight, std::int64_t N, std::int64_t K, std::int64_t M) {
    ops::matmul_backward(dinp ? dinp.f32() : nullptr, dweight, dbias, dout.f32(), inp.f32(), weight, N, K, M);
}

std::unique_ptr<OperandStorage> CpuBackend::make_operand_storage() { return std::make_unique<CpuStorage>(); }

std::unique_ptr<AmaxHistory> CpuBackend::make_amax_history(const DelayedScaling& recipe) {
    return std::make_unique<CpuAmaxHistory>(recipe);
}

GemmOperand CpuBackend::cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) {
    GemmOperand op;
    if (!spec.recipe) {  // float32 is the GEMM's own type: the operand is x itself
        op.rowwise = x;
        op.columnwise = transposed_view(x);
        return op;
    }
    const Recipe& r = *spec.recipe;
    auto& s = static_cast<CpuStorage&>(storage);
    DelayedState* live = spec.history ? &static_cast<CpuAmaxHistory*>(spec.history)->state : nullptr;
    const bool by_transpose = columnwise_is_transpose(r);
    const MatrixView v = view(x);

    op.mode = std::holds_alternative<MXScaling>(r)      ? ScalingMode::MX
              : std::holds_alternative<BlockScaling>(r) ? ScalingMode::Block
                                                        : ScalingMode::PerTensor;
    op.format = recipe_format(r);
    op.emulated = true;
    if (const auto* b = std::get_if<BlockScaling>(&r)) op.block_rows = b->block_rows, op.block_cols = b->block_cols;
    if (const auto* m = std::get_if<MXScaling>(&r)) op.block_rows = 1, op.block_cols = m->block;
    auto rowwise_desc = [&] { return TensorDesc{s.rowwise.data(), DType::F32, x.rows, x.cols, Device::CPU, false}; };
    auto columnwise_desc = [&] { return TensorDesc{s.columnwise.data(), DType::F32, x.cols, x.rows, Device::CPU, false}; };

    // Both copies cast with the scale in force before this cast's push; only the rowwise
    // cast pushes (a columnwise-only cast of a delayed operand is a transposed view).
    std::optional<CastInfo> info;  // of the rowwise cast, when there is one
    if (spec.rowwise && spec.columnwise && !by_transpose && has_cast_transpose(r)) {
        // 1 x B tiles and MX: both copies in one pass over x.
        info = fake_quantize_transposed(v, r, grow(s.rowwise, x.numel()), grow(s.columnwise, x.numel()));
        op.rowwise = rowwise_desc();
        op.columnwise = columnwise_desc();
    } else {
        if (spec.rowwise || (spec.columnwise && by_transpose)) {
            if (live && !spec.push) {
                DelayedState scratch(*live);
                info = fake_quantize(v, r, grow(s.rowwise, x.numel()), &scratch);
            } else {
                info = fake_quantize(v, r, grow(s.rowwise, x.numel()), live);
            }
            op.rowwise = rowwise_desc();
        }
        if (spec.columnwise) {
            if (by_transpose) {
                op.columnwise = transposed_view(op.rowwise);
            } else {  // blocks of other shapes: cast the transpose
                ops::transpose(grow(s.transposed, x.numel()), v.data, x.rows, x.cols);
                fake_quantize(MatrixView{s.transposed.data(), x.cols, x.rows}, r, grow(s.columnwise, x.numel()));
                op.columnwise = columnwise_desc();
            }
        }
    }
    if (spec.report && info) *spec.report = *info;
    if (spec.amax_out && info) *spec.amax_out = info->amax;
    if (!spec.rowwise) op.rowwise = {};
    return op;
}

void CpuBackend::gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                      const float* bias, bool accumulate, const GemmEpilogue& epi) {
    if (epi.kind != GemmEpilogue::Kind::None) return gemm_then_epilogue(a, ca, b, cb, out, bias, accumulate, epi);
    const TensorDesc& A = ca == Copy::Rowwise ? a.rowwise : a.columnwise;  // (m,k)
    const TensorDesc& B = cb == Copy::Rowwise ? b.rowwise : b.columnwise;  // (n,k)
    if (!A.data || !B.data || A.cols != B.cols || out.rows != A.rows || out.cols != B.rows)
        throw std::logic_error("cpu gemm: operands (" + std::to_string(A.rows) + "x" + std::to_string(A.cols) + ", " +
                               std::to_string(B.rows) + "x" + std::to_string(B.cols) + ") do not give " +
                               std::to_string(out.rows) + "x" + std::to_string(out.cols));
    // A view of a transpose is read with the transpose flag; B is read transposed.
    ops::sgemm(A.transposed, !B.transposed, A.rows, B.rows, A.cols, f32(A), f32(B), f32(out),
               accumulate ? 1.0f : 0.0f);
    if (bias) ops::add_bias(f32(out), bias, out.rows, out.cols);
}

void CpuBackend::bias_backward(float* dbias, const TensorDesc& dout) {
    ops::bias_backward(dbias, f32(dout), dout.rows, dout.cols);
}

// --- optimizer -----------------------------------------------------------------------

// Every element is updated independently, so the parallel loop cannot change results
// (simd.h's kernel: vectorized for the CPU, the same arithmetic as a scalar loop).
void CpuBackend::adamw(float* params, const float* g, float* m, float* v, const std::vector<DecayRun>& decay,
                       std::int64_t n, const AdamWParams& p) {
    check_decay_runs(decay, n);
    const simd::AdamWArgs a{p.beta1,          p.beta2,          p.eps,       p.weight_decay, p.lr,
                            p.bias_correction1, p.bias_correction2, p.grad_scale};
    const simd::Kernels& k = simd::kernels();
    parallel_for(n, 1 << 14, 0, [&](std::int64_t i0, std::int64_t i1) {
        auto update = [&](std::int64_t b, std::int64_t e, bool d) {
            if (b < e) k.adamw(params + b, g + b, m + b, v + b, d, e - b, a);
        };
        // the runs meeting [i0, i1): decay inside them, none between
        auto r = std::upper_bound(decay.begin(), decay.end(), i0,
                                  [](std::int64_t i, const DecayRun& run) { return i < run.end; });
        std::int64_t i = i0;
        for (; r != decay.end() && r->begin < i1; ++r) {
            const std::int64_t b = std::max(r->begin, i0), e = std::min(r->end, i1);
            update(i, b, false);
            update(b, e, true);
            i = e;
        }
        update(i, i1, false);
    });
}

// Double sums over fixed-size chunks, each summed in index order, combined in order: the
// same for any thread count. A task sums 8 chunks side by side (8 independent chains
// instead of one, the same order within each chunk).
double CpuBackend::grad_norm(const float* grads, std::int64_t n) {
    constexpr std::int64_t kChunk = 1 << 14, kSide = 8;
    const std::int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(std::size_t(chunks), 0.0);
    parallel_for((chunks + kSide - 1) / kSide, 1, 0, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c0 = b * kSide; c0 < std::min(chunks, e * kSide); c0 += kSide) {
            if (c0 + kSide > chunks || (c0 + kSide) * kChunk > n) {  // the last, short group
                for (std::int64_t c = c0; c < chunks; ++c) {
                    double s = 0.0;
                    for (std::int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
                        s += double(grads[i]) * double(grads[i]);
                    partial[std::size_t(c)] = s;
                }
                continue;
            }
            double s[kSide] = {};
            const float* x = grads + c0 * kChunk;
            for (std::int64_t i = 0; i < kChunk; ++i)
                for (std::int64_t j = 0; j < kSide; ++j) s[j] += double(x[j * kChunk + i]) * double(x[j * kChunk + i]);
            for (std::int64_t j = 0; j < kSide; ++j) partial[std::size_t(c0 + j)] = s[j];
        }
    });
    double total = 0.0;
    for (double s : partial) total += s;
    return std::sqrt(total);
}

void CpuBackend::scale(float* x, float factor, std::int64_t n) {
    parallel_for(n, 1 << 14, 0, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) x[i] *= factor;
    });
}

// --- FP8 gradient sums --------------------------------------------------------------

void CpuBackend::quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format) {
    fp8scope::quantize_chunks(static_cast<std::uint8_t*>(slots), x, layout, format);
}

void CpuBackend::dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                                Format format) {
    fp8scope::dequantize_sum(out, static_cast<const std::uint8_t*>(slots), slot_bytes, count, n, format);
}

// --- statistics ----------------------------------------------------------------------

float CpuBackend::scaling_amax(const TensorDesc& x) {
    // The amax does not depend on the layout: a transposed view is read as it is stored.
    return fp8scope::scaling_amax(MatrixView{f32(x), 1, x.numel()});
}

Analysis CpuBackend::analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                             const AnalysisExtras& extras) {
    std::vector<float> tmp;
    return fp8scope::analyze(contiguous(x, tmp), recipes, opt, extras);
}

}  // namespace fp8scope
