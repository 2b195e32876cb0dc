// The CUDA backend (cuda_backend.h): the device, the stream, memory, the cast reports,
// the layer ops, the optimizer and the statistics. The cast and the GEMMs are in
// cuda_backend_gemm.cpp.
#include "cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cpu/analysis.h"
#include "cuda/analysis/analysis.h"
#include "cuda/cast/chunks.h"
#include "cuda/cast/quantize.h"
#include "cuda/cuda_backend_kernels.h"
#include "cuda/cuda_backend_lane.h"
#include "cuda/cuda_backend_mirror.h"
#include "cuda/gemm/gemm.h"
#include "cuda/ops/ops.h"
#include "cuda/runtime/check.h"
#include "io/half.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

using cuda::bf16;

const char* kind(DType t) { return dtype_name(t); }

bf16* bits(ActPtr p, const char* op) {
    if (p.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda ") + op + ": activations are " + kind(p.dtype) + ", not bf16");
    return reinterpret_cast<bf16*>(p.ptr);
}

// Where the small results read back lie in a lane's results (Lane::kResultBytes).
constexpr std::size_t kResultBytes = CudaBackend::Lane::kResultBytes;
constexpr std::size_t kNormOffset = 16, kAmaxOffset = 32;

}  // namespace

std::string cublaslt_version() {
    const std::size_t v = cublasLtGetVersion();
    return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::string cuda_runtime_version() {
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "?";
    return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// --- scratch -----------------------------------------------------------------------------

CudaBackend::Scratch::~Scratch() {
    if (ptr_) backend_->free_now(ptr_);
}

void CudaBackend::Scratch::reset() {
    if (ptr_) backend_->free_now(ptr_);
    ptr_ = nullptr;
    bytes_ = 0;
}

void* CudaBackend::Scratch::grow(std::size_t bytes) {
    if (bytes <= bytes_) return ptr_;
    reset();
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
    bytes_ = bytes;
    return ptr_;
}

// --- device, stream, memory --------------------------------------------------------------

CudaBackend::CudaBackend(int device, int threads) : device_(device) {
    set_default_threads(threads);
    FP8SCOPE_CUDA_CHECK(cudaSetDevice(device));
    cudaDeviceProp p{};
    FP8SCOPE_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    name_ = p.name;
    major_ = p.major;
    minor_ = p.minor;
    memory_bytes_ = p.totalGlobalMem;
    main_ = std::make_unique<Lane>(*this);
    analyzer_ = std::make_unique<cuda::Analyzer>();
    mirror_ = std::make_unique<cuda::WeightMirror>(*this);
}

CudaBackend::~CudaBackend() {
    // Nothing may throw here: a failure means the context is gone, and so is the memory.
    // The device is drained once here, so scratch memory is freed without waits from now on.
    cudaDeviceSynchronize();
    closing_ = true;
    mirror_.reset();
    analyzer_.reset();
    lanes_.clear();
    main_.reset();
}

std::string CudaBackend::describe() const {
    char mem[32];
    std::snprintf(mem, sizeof mem, "%.1f GiB", double(memory_bytes_) / 1073741824.0);
    return "cuda: " + name_ + " (sm_" + std::to_string(major_) + std::to_string(minor_) + "), " + mem +
           ", CUDA runtime " + cuda_runtime_version() + ", cuBLASLt " + cublaslt_version();
}

void CudaBackend::free_now(void* p) {
    if (!p) return;
    if (!fenced_.empty()) cudaEventSynchronize(fence_);  // a snapshot may be reading it
    if (!closing_) cudaStreamSynchronize(stream());
    cudaFree(p);
}

void* CudaBackend::allocate(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = nullptr;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&p, bytes));
    if (cudaError_t e = cudaMemsetAsync(p, 0, bytes, stream()); e != cudaSuccess) {
        cudaFree(p);
        cuda::fail("cudaMemsetAsync", __FILE__, __LINE__, cudaGetErrorString(e));
    }
    mirror_->written(p, bytes);  // memory of a freed parameter range, maybe
    return p;
}

// Called from destructors (DeviceBuffer): never throws.
void CudaBackend::release(void* p) { free_now(p); }

void CudaBackend::copy_to_host(void* host, const void* src, std::size_t bytes) {
    if (!bytes) return;
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void CudaBackend::copy_from_host(void* dst, const void* host, std::size_t bytes) {
    if (!bytes) return;
    before_write(dst, bytes);
    mirror_->written(dst, bytes);
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));  // the host buffer may go right after
}

// memmove semantics: overlapping ranges go through scratch (cudaMemcpy does not allow them).
void CudaBackend::copy(void* dst, const void* src, std::size_t bytes) {
    if (!bytes || dst == src) return;
    before_write(dst, bytes);
    mirror_->written(dst, bytes);
    const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
    if (d < s + bytes && s < d + bytes) {
        void* tmp = lane().emulated_a->grow(bytes);
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, stream()));
        src = tmp;
    }
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::fill_zero(void* p, std::size_t bytes) {
    if (!bytes) return;
    before_write(p, bytes);
    mirror_->written(p, bytes);
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream()));
}

void CudaBackend::convert(void* out, DType to, const void* in, DType from, std::int64_t n) {
    before_write(out, std::size_t(n) * dtype_size(to));
    mirror_->written(out, std::size_t(n) * dtype_size(to));
    if (from == DType::F32 && to == DType::BF16)
        cuda::f32_to_bf16(static_cast<std::uint16_t*>(out), static_cast<const float*>(in), n, stream());
    else if (from == DType::BF16 && to == DType::F32)
        cuda::bf16_to_f32(static_cast<float*>(out), static_cast<const std::uint16_t*>(in), n, stream());
    else
        throw std::logic_error(std::string("cuda convert: ") + dtype_name(from) + " to " + dtype_name(to));
}

void* CudaBackend::workspace(std::size_t bytes) { return lane().workspace->grow(std::max<std::size_t>(bytes, 256)); }

// --- cast reports ------------------------------------------------------------------------

cuda::CastStats* CudaBackend::report_slot() {
    Lane& l = lane();
    if (l.pending_reports.size() == l.report_capacity) {
        synchronize();  // nothing pending now: the arrays may move
        const std::size_t capacity = std::max<std::size_t>(256, 2 * l.report_capacity);
        if (l.report_device) cudaFree(l.report_device);
        if (l.report_host) cudaFreeHost(l.report_host);
        l.report_device = nullptr, l.report_host = nullptr, l.report_capacity = 0;
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&l.report_device, capacity * sizeof(cuda::CastStats)));
        FP8SCOPE_CUDA_CHECK(cudaMallocHost(&l.report_host, capacity * sizeof(cuda::CastStats)));
        l.report_capacity = capacity;
    }
    return l.report_device + l.pending_reports.size();
}

void CudaBackend::synchronize() {
    Lane& l = lane();
    const std::size_t n = l.pending_reports.size();
    if (n) FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(l.report_host, l.report_device, n * sizeof(cuda::CastStats),
                                               cudaMemcpyDeviceToHost, l.stream));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(l.stream));
    for (std::size_t i = 0; i < n; ++i) {
        const cuda::CastStats& s = l.report_host[i];
        CastInfo& info = *l.pending_reports[i];
        info.amax = s.amax;
        info.scale = s.scale;
        info.overflow = std::int64_t(s.overflow_rowwise);
    }
    l.pending_reports.clear();
}

// --- layer ops ---------------------------------------------------------------------------

void CudaBackend::embedding_forward(ActPtr out, const std::int32_t* tokens, const float* wte, const float* wpe, int B,
                                    int T, int C) {
    cuda::embedding_forward(bits(out, "embedding_forward"), tokens, wte, wpe, B, T, C, stream());
}

void CudaBackend::embedding_backward(float* dwte, float* dwpe, ActPtr dout, const std::int32_t* tokens, int B, int T,
                                     int C) {
    const std::size_t bytes = cuda::embedding_backward_workspace(B, T);
    cuda::embedding_backward(dwte, dwpe, bits(dout, "embedding_backward"), tokens, B, T, C,
                             {workspace(bytes), bytes}, stream());
}

void CudaBackend::layernorm_forward(ActPtr out, float* mean, float* rstd, ActPtr inp, const float* weight,
                                    const float* bias, std::int64_t N, int C) {
    cuda::layernorm_forward(bits(out, "layernorm_forward"), mean, rstd, bits(inp, "layernorm_forward"), weight, bias,
                            N, C, stream());
}

void CudaBackend::layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                     const float* weight, const float* mean, const float* rstd, std::int64_t N,
                                     int C) {
    const std::size_t bytes = cuda::norm_backward_workspace(N, C);
    cuda::layernorm_backward(bits(dinp, "layernorm_backward"), dweight, dbias, bits(dout, "layernorm_backward"),
                             bits(inp, "layernorm_backward"), weight, mean, rstd, N, C, {workspace(bytes), bytes},
                             stream());
}

void CudaBackend::rmsnorm_forward(ActPtr out, float* rstd, ActPtr inp, const float* weight, std::int64_t N, int C) {
    cuda::rmsnorm_forward(bits(out, "rmsnorm_forward"), rstd, bits(inp, "rmsnorm_forward"), weight, N, C, stream());
}

void CudaBackend::rmsnorm_backward(ActPtr dinp, float* dweight, ActPtr dout, ActPtr inp, const float* weight,
                                   const float* rstd, std::int64_t N, int C) {
    const std::size_t bytes = cuda::norm_backward_workspace(N, C);
    cuda::rmsnorm_backward(bits(dinp, "rmsnorm_backward"), dweight, bits(dout, "rmsnorm_backward"),
                           bits(inp, "rmsnorm_backward"), weight, rstd, N, C, {workspace(bytes), bytes}, stream());
}

std::int64_t CudaBackend::attention_saved(int B, int T, int NH) const { return cuda::attention_saved(B, T, NH); }

void CudaBackend::attention_forward(ActPtr out, ActPtr att, ActPtr qkv, int B, int T, int C, int NH, int NKV) {
    const std::size_t bytes = cuda::attention_forward_workspace(B, T, C, NH, NKV);
    cuda::attention_forward(bits(out, "attention_forward"), bits(att, "attention_forward"),
                            bits(qkv, "attention_forward"), B, T, C, NH, NKV, {workspace(bytes), bytes}, stream());
}

void CudaBackend::attention_backward(ActPtr dqkv, ActPtr dout, ActPtr qkv, ActPtr out, ActPtr att, int B, int T,
                                     int C, int NH, int NKV) {
    const std::size_t bytes = cuda::attention_backward_workspace(B, T, C, NH, NKV);
    cuda::attention_backward(bits(dqkv, "attention_backward"), bits(dout, "attention_backward"),
                             bits(qkv, "attention_backward"), out ? bits(out, "attention_backward") : nullptr,
                             bits(att, "attention_backward"), B, T, C, NH, NKV, {workspace(bytes), bytes}, stream());
}

void CudaBackend::rope(ActPtr qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse) {
    cuda::rope(bits(qkv, "rope"), table, B, T, NH, NKV, hs, inverse, stream());
}

void CudaBackend::gelu_forward(ActPtr out, ActPtr inp, std::int64_t n) {
    cuda::gelu_forward(bits(out, "gelu_forward"), bits(inp, "gelu_forward"), n, stream());
}

void CudaBackend::gelu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t n) {
    cuda::gelu_backward(bits(dinp, "gelu_backward"), bits(inp, "gelu_backward"), bits(dout, "gelu_backward"), n,
                        stream());
}

void CudaBackend::swiglu_forward(ActPtr out, ActPtr inp, std::int64_t N, int H) {
    cuda::swiglu_forward(bits(out, "swiglu_forward"), bits(inp, "swiglu_forward"), N, H, stream());
}

void CudaBackend::swiglu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t N, int H) {
    cuda::swiglu_backward(bits(dinp, "swiglu_backward"), bits(inp, "swiglu_backward"), bits(dout, "swiglu_backward"),
                          N, H, stream());
}

void CudaBackend::smooth_swiglu_scales(float* scales, ActPtr h, std::int64_t N, int H) {
    cuda::smooth_swiglu_scales(scales, bits(h, "smooth_swiglu_scales"), N, H, stream());
}

void CudaBackend::scale_columns(const TensorDesc& out, const TensorDesc& in, const float* s, bool inverse) {
    if (in.transposed || out.transposed || out.dtype != in.dtype || out.rows != in.rows || out.cols != in.cols)
        throw std::logic_error("cuda scale_columns: out and in must be row-major tensors of one shape and dtype");
    if (in.dtype == DType::BF16)
        cuda::scale_columns(static_cast<bf16*>(out.data), static_cast<const bf16*>(in.data), s, inverse, in.rows,
                            in.cols, stream());
    else if (in.dtype == DType::F32)
        cuda::scale_columns(static_cast<float*>(out.data), static_cast<const float*>(in.data), s, inverse, in.rows,
                            in.cols, stream());
    else
        throw std::logic_error(std::string("cuda scale_columns: tensor is ") + kind(in.dtype));
}

void CudaBackend::scale_channels(const TensorDesc& t, const std::int32_t* index, int count, bool rows, float factor) {
    if (t.transposed) throw std::logic_error("cuda scale_channels: t must be a row-major tensor");
    before_write(t.data, std::size_t(t.rows * t.cols) * dtype_size(t.dtype));
    if (t.dtype == DType::BF16)
        cuda::scale_channels(static_cast<bf16*>(t.data), t.rows, t.cols, index, count, rows, factor, stream());
    else if (t.dtype == DType::F32)
        cuda::scale_channels(static_cast<float*>(t.data), t.rows, t.cols, index, count, rows, factor, stream());
    else
        throw std::logic_error(std::string("cuda scale_channels: tensor is ") + kind(t.dtype));
}

void CudaBackend::add(ActPtr out, ActPtr a, ActPtr b, std::int64_t n) {
    cuda::add(bits(out, "add"), bits(a, "add"), bits(b, "add"), n, stream());
}

void CudaBackend::softmax_ce_forward(ActPtr probs, float* losses, ActPtr logits, const std::int32_t* targets,
                                     std::int64_t N, int V) {
    cuda::softmax_ce_forward(bits(probs, "softmax_ce_forward"), losses, bits(logits, "softmax_ce_forward"), targets,
                             N, V, stream());
}

float CudaBackend::mean_loss(const float* losses, std::int64_t N) {
    Lane& l = lane();
    auto* mean = static_cast<float*>(l.results->grow(kResultBytes));
    cuda::mean_loss(mean, losses, N, stream());
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(l.host_results, mean, sizeof(float), cudaMemcpyDeviceToHost, stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
    float out;
    std::memcpy(&out, l.host_results, sizeof out);
    return out;
}

void CudaBackend::softmax_ce_backward(ActPtr dlogits, ActPtr probs, const std::int32_t* targets, std::int64_t N,
                                      int V, std::int64_t mean_over) {
    cuda::softmax_ce_backward(bits(dlogits, "softmax_ce_backward"), bits(probs, "softmax_ce_backward"), targets, N, V,
                              stream(), mean_over);
}

void CudaBackend::bias_backward(float* dbias, const TensorDesc& dout) {
    if (dout.transposed) throw std::logic_error("cuda bias_backward: dout must be row-major");
    const std::size_t bytes = cuda::bias_backward_workspace(dout.rows, dout.cols);
    const cuda::Workspace ws{workspace(bytes), bytes};
    if (dout.dtype == DType::BF16)
        cuda::bias_backward(dbias, static_cast<const bf16*>(dout.data), dout.rows, dout.cols, ws, stream());
    else if (dout.dtype == DType::F32)
        cuda::bias_backward(dbias, static_cast<const float*>(dout.data), dout.rows, dout.cols, ws, stream());
    else
        throw std::logic_error(std::string("cuda bias_backward: dout is ") + kind(dout.dtype));
}

// --- optimizer ---------------------------------------------------------------------------

// The runs go to the device when they change (an optimizer's stay the same for the run).
void CudaBackend::adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay,
                        std::int64_t n, const AdamWParams& p) {
    check_decay_runs(decay, n);
    for (const void* state : {static_cast<const void*>(params), static_cast<const void*>(m), static_cast<const void*>(v)})
        before_write(state, std::size_t(n) * sizeof(float));
    Lane& l = lane();
    if (decay != l.decay_uploaded && !decay.empty()) {
        auto* runs = l.decay_runs->grow_as<DecayRun>(decay.size());
        l.decay_uploaded.assign(decay.begin(), decay.end());
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(runs, l.decay_uploaded.data(), decay.size() * sizeof(DecayRun),
                                            cudaMemcpyHostToDevice, l.stream));
    }
    const auto* runs = decay.empty() ? nullptr : static_cast<const DecayRun*>(l.decay_runs->data());
    cuda::adamw(params, grads, m, v, runs, std::int64_t(decay.size()), n, p, stream(), mirror_->for_update(params, n));
}

double CudaBackend::grad_norm(const float* grads, std::int64_t n) {
    Lane& l = lane();
    const std::size_t bytes = cuda::grad_norm_workspace(n);
    auto* norm = reinterpret_cast<double*>(static_cast<char*>(l.results->grow(kResultBytes)) + kNormOffset);
    cuda::grad_norm(norm, grads, n, {workspace(bytes), bytes}, stream());
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(l.host_results, norm, sizeof(double), cudaMemcpyDeviceToHost, stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
    double out;
    std::memcpy(&out, l.host_results, sizeof out);
    return out;
}

void CudaBackend::scale(float* x, float factor, std::int64_t n) {
    before_write(x, std::size_t(n) * sizeof(float));
    mirror_->written(x, std::size_t(n) * sizeof(float));
    cuda::scale(x, factor, n, stream());
}

// --- FP8 gradient sums -------------------------------------------------------------------

void CudaBackend::quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format) {
    cuda::quantize_chunks(slots, x, layout, format, stream());
}

void CudaBackend::dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                                 Format format) {
    mirror_->written(out, std::size_t(n) * sizeof(float));
    cuda::dequantize_sum(out, slots, slot_bytes, count, n, format, stream());
}

// --- statistics --------------------------------------------------------------------------

float CudaBackend::scaling_amax(const TensorDesc& x) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda scaling_amax: tensor is ") + kind(x.dtype));
    Lane& l = lane();
    // The amax does not depend on the layout: a transposed view is read as it is stored.
    auto* amax = reinterpret_cast<float*>(static_cast<char*>(l.results->grow(kResultBytes)) + kAmaxOffset);
    cuda::scaling_amax(cuda::CastInput{x.data, x.dtype, 1, x.numel()}, amax, stream());
    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(l.host_results, amax, sizeof(float), cudaMemcpyDeviceToHost, stream()));
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream()));
    float out;
    std::memcpy(&out, l.host_results, sizeof out);
    return out;
}

Analysis CudaBackend::analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                              const AnalysisExtras& extras) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda analyze: tensor is ") + kind(x.dtype));
    if (cuda::device_analysis_supports(recipes, opt, x.numel()))
        return analyzer_->analyze({x.data, x.dtype, x.rows, x.cols, x.transposed}, recipes, opt, extras, stream());
    const std::vector<float> values = host_values(x);
    return fp8scope::analyze(MatrixView{values.data(), x.rows, x.cols}, recipes, opt, extras);
}

std::vector<float> CudaBackend::host_values(const TensorDesc& x) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::logic_error(std::string("cuda host_values: tensor is ") + kind(x.dtype));
    const std::size_t n = std::size_t(x.numel());
    std::vector<float> stored(n);  // as stored: (rows, cols), or (cols, rows) for a transposed view
    if (x.dtype == DType::F32) {
        copy_to_host(stored.data(), x.data, n * sizeof(float));
    } else {
        std::vector<std::uint16_t> raw(n);
        copy_to_host(raw.data(), x.data, n * sizeof(std::uint16_t));
        parallel_for(std::int64_t(n), 1 << 16, 0, [&](std::int64_t i0, std::int64_t i1) {
            for (std::int64_t i = i0; i < i1; ++i) stored[std::size_t(i)] = bf16_to_float(raw[std::size_t(i)]);
        });
    }
    if (!x.transposed) return stored;
    std::vector<float> values(n);  // the view's (rows, cols) = the transpose of what is stored
    const std::int64_t rows = x.rows, cols = x.cols;
    parallel_for(rows, 16, 0, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = 0; c < cols; ++c) values[std::size_t(r * cols + c)] = stored[std::size_t(c * rows + r)];
    });
    return values;
}

}  // namespace fp8scope
