// The CPU backend (cpu_backend.h): memory, the layer and optimizer ops over kernels/cpu/ops,
// and the fused analysis. The cast and the GEMMs are in cpu_backend_gemm.cpp.
#include "cpu/cpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/analysis.h"
#include "cpu/blas.h"
#include "cpu/chunks.h"
#include "cpu/cpu_info.h"
#include "cpu/nonfinite.h"
#include "cpu/ops/activation.h"
#include "cpu/ops/adamw.h"
#include "cpu/ops/attention.h"
#include "cpu/ops/rope.h"
#include "cpu/ops/elementwise.h"
#include "cpu/ops/embedding.h"
#include "cpu/ops/matmul.h"
#include "cpu/ops/norm.h"
#include "cpu/ops/softmax_ce.h"
#include "cpu/quantize.h"
#include "io/half.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

// The values of t, laid out row-major: t itself, or its transpose materialized in `tmp`.
MatrixView contiguous(const TensorDesc& t, std::vector<float>& tmp) {
    if (!t.transposed) return MatrixView{cpu_f32(t), t.rows, t.cols};
    tmp.resize(std::size_t(t.numel()));
    ops::transpose(tmp.data(), cpu_f32(t), t.cols, t.rows);
    return MatrixView{tmp.data(), t.rows, t.cols};
}

}  // namespace

float* cpu_f32(const TensorDesc& t) {
    if (t.dtype != DType::F32) throw std::logic_error(std::string("cpu backend: tensor is ") + dtype_name(t.dtype));
    return static_cast<float*>(t.data);
}

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

void CpuBackend::attention_forward(ActPtr out, ActPtr att, ActPtr qkv, int B, int T, int C, int NH, int NKV) {
    ops::attention_forward(out.f32(), att.f32(), qkv.f32(), B, T, C, NH, NKV);
}

void CpuBackend::attention_backward(ActPtr dqkv, ActPtr dout, ActPtr qkv, ActPtr /*out*/, ActPtr att, int B, int T,
                                    int C, int NH, int NKV) {
    ops::attention_backward(dqkv.f32(), dout.f32(), qkv.f32(), att.f32(), B, T, C, NH, NKV);
}

void CpuBackend::rope(ActPtr qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse) {
    ops::rope(qkv.f32(), table, B, T, NH, NKV, hs, inverse);
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
    ops::scale_columns(cpu_f32(out), cpu_f32(in), s, inverse, in.rows, in.cols);
}

void CpuBackend::scale_channels(const TensorDesc& t, const std::int32_t* index, int count, bool rows, float factor) {
    if (t.transposed) throw std::logic_error("cpu scale_channels: t must be a row-major tensor");
    ops::scale_channels(cpu_f32(t), t.rows, t.cols, index, count, rows, factor);
}

void CpuBackend::add(ActPtr out, ActPtr a, ActPtr b, std::int64_t n) { ops::add(out.f32(), a.f32(), b.f32(), n); }

void CpuBackend::softmax_ce_forward(ActPtr probs, float* losses, ActPtr logits, const std::int32_t* targets,
                                    std::int64_t N, int V) {
    ops::softmax_ce_forward(probs.f32(), losses, logits.f32(), targets, N, V);
}

float CpuBackend::mean_loss(const float* losses, std::int64_t N) { return ops::mean_loss(losses, N); }

void CpuBackend::softmax_ce_backward(ActPtr dlogits, ActPtr probs, const std::int32_t* targets, std::int64_t N,
                                     int V, std::int64_t mean_over) {
    ops::softmax_ce_backward(dlogits.f32(), probs.f32(), targets, N, V, mean_over);
}

void CpuBackend::matmul_forward(ActPtr out, ActPtr inp, const float* weight, const float* bias, std::int64_t N,
                                std::int64_t K, std::int64_t M) {
    ops::matmul_forward(out.f32(), inp.f32(), weight, bias, N, K, M);
}

void CpuBackend::matmul_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                 const float* weight, std::int64_t N, std::int64_t K, std::int64_t M) {
    ops::matmul_backward(dinp ? dinp.f32() : nullptr, dweight, dbias, dout.f32(), inp.f32(), weight, N, K, M);
}

// --- optimizer -----------------------------------------------------------------------

void CpuBackend::adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay,
                       std::int64_t n, const AdamWParams& p) {
    ops::adamw(params, grads, m, v, decay, n, p);
}

double CpuBackend::grad_norm(const float* grads, std::int64_t n) { return ops::grad_norm(grads, n); }

void CpuBackend::scale(float* x, float factor, std::int64_t n) { ops::scale(x, factor, n); }

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
    return fp8scope::scaling_amax(MatrixView{cpu_f32(x), 1, x.numel()});
}

void CpuBackend::find_nonfinite(const TensorDesc& x, std::uint32_t tag, std::uint64_t* first) {
    if (*first != kNoNonFinite && (*first >> 32) <= tag) return;  // an earlier site holds the first
    const std::int64_t i = first_nonfinite(x.data, x.dtype, x.numel());
    if (i >= 0) *first = std::min(*first, nonfinite_key(tag, std::uint64_t(i)));
}

Analysis CpuBackend::analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                             const AnalysisExtras& extras) {
    std::vector<float> tmp;
    return fp8scope::analyze(contiguous(x, tmp), recipes, opt, extras);
}

std::vector<float> CpuBackend::host_values(const TensorDesc& x) {
    std::vector<float> tmp;
    const MatrixView v = contiguous(x, tmp);
    return tmp.empty() ? std::vector<float>(v.data, v.data + x.numel()) : tmp;
}

}  // namespace fp8scope
