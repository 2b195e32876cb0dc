// The CPU backend: float32 everywhere, FP8 emulated. A cast writes the dequantized values
// (bit-exact FP8 values times their scale_inv, kernels/cpu/quantize.h) and the GEMMs are
// OpenBLAS sgemms on them, so results equal a real FP8 GEMM with float32 accumulation up
// to summation order. Memory is host memory; everything is synchronous.
//
// Operand orientation: a per-tensor scale or square blocks quantize the transpose to
// exactly the transposed values, so those columnwise copies are transposed views of the
// rowwise copy (the sgemm's transpose flags read them, no second cast). 1x128 tiles and MX
// blocks run along one axis, so their columnwise copy is a cast of its own, made in the same
// pass over x as the rowwise one (fake_quantize_transposed). docs/cpu-backend.md has the
// GEMM kernel choice and the vector kernels.
#pragma once

#include <memory>
#include <string>

#include "backend.h"

namespace fp8scope {

class CpuBackend final : public Backend {
public:
    // threads <= 0: all hardware threads. Sets the process's default thread count and
    // OpenBLAS's, so one setting bounds every thread of the run.
    explicit CpuBackend(int threads = 0);

    Device device() const override { return Device::CPU; }
    std::string describe() const override;
    DType activation_dtype() const override { return DType::F32; }

    // DeviceMemory: host memory, synchronous.
    void* allocate(std::size_t bytes) override;
    void release(void* p) override;
    void copy_to_host(void* host, const void* src, std::size_t bytes) override;
    void copy_from_host(void* dst, const void* host, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void fill_zero(void* p, std::size_t bytes) override;
    void convert(void* out, DType to, const void* in, DType from, std::int64_t n) override;
    void synchronize() override {}

    // LayerOps: kernels/cpu/ops.
    void embedding_forward(ActPtr out, const std::int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                           int C) override;
    void embedding_backward(float* dwte, float* dwpe, ActPtr dout, const std::int32_t* tokens, int B, int T,
                            int C) override;
    void layernorm_forward(ActPtr out, float* mean, float* rstd, ActPtr inp, const float* weight, const float* bias,
                           std::int64_t N, int C) override;
    void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp, const float* weight,
                            const float* mean, const float* rstd, std::int64_t N, int C) override;
    void rmsnorm_forward(ActPtr out, float* rstd, ActPtr inp, const float* weight, std::int64_t N, int C) override;
    void rmsnorm_backward(ActPtr dinp, float* dweight, ActPtr dout, ActPtr inp, const float* weight,
                          const float* rstd, std::int64_t N, int C) override;
    std::int64_t attention_saved(int B, int T, int NH) const override;
    void attention_forward(ActPtr out, ActPtr att, ActPtr qkv, int B, int T, int C, int NH, int NKV) override;
    void attention_backward(ActPtr dqkv, ActPtr dout, ActPtr qkv, ActPtr out, ActPtr att, int B, int T, int C,
                            int NH, int NKV) override;
    void rope(ActPtr qkv, const float* table, int B, int T, int NH, int NKV, int hs, bool inverse) override;
    void gelu_forward(ActPtr out, ActPtr inp, std::int64_t n) override;
    void gelu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t n) override;
    void swiglu_forward(ActPtr out, ActPtr inp, std::int64_t N, int H) override;
    void swiglu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t N, int H) override;
    void smooth_swiglu_scales(float* scales, ActPtr h, std::int64_t N, int H) override;
    void scale_columns(const TensorDesc& out, const TensorDesc& in, const float* s, bool inverse) override;
    void scale_channels(const TensorDesc& t, const std::int32_t* index, int count, bool rows, float factor) override;
    void add(ActPtr out, ActPtr a, ActPtr b, std::int64_t n) override;
    void softmax_ce_forward(ActPtr probs, float* losses, ActPtr logits, const std::int32_t* targets, std::int64_t N,
                            int V) override;
    float mean_loss(const float* losses, std::int64_t N) override;
    void softmax_ce_backward(ActPtr dlogits, ActPtr probs, const std::int32_t* targets, std::int64_t N,
                             int V, std::int64_t mean_over) override;
    void matmul_forward(ActPtr out, ActPtr inp, const float* weight, const float* bias, std::int64_t N,
                        std::int64_t K, std::int64_t M) override;
    void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp, const float* weight,
                         std::int64_t N, std::int64_t K, std::int64_t M) override;

    // Fp8Ops: the fake-quantize cast and sgemms (cpu_backend_gemm.cpp).
    std::unique_ptr<OperandStorage> make_operand_storage() override;
    std::unique_ptr<AmaxHistory> make_amax_history(const DelayedScaling& recipe) override;
    GemmOperand cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) override;
    void gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
              const float* bias, bool accumulate, const GemmEpilogue& epi) override;
    void bias_backward(float* dbias, const TensorDesc& dout) override;

    // OptimizerOps: kernels/cpu/ops/adamw.h, elementwise.h and chunks.h.
    void adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay, std::int64_t n,
               const AdamWParams& p) override;
    double grad_norm(const float* grads, std::int64_t n) override;
    void scale(float* x, float factor, std::int64_t n) override;
    void quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format) override;
    void dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                        Format format) override;

    // AnalysisOps: the fused passes of kernels/cpu/analysis.h. KernelTracing keeps its
    // defaults: the CPU runs no kernels.
    float scaling_amax(const TensorDesc& x) override;
    Analysis analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                     const AnalysisExtras& extras) override;
    OutputError output_error(const TensorDesc& out, const TensorDesc& reference) override;  // output_error.cpp
    std::vector<float> host_values(const TensorDesc& x) override;

    // NonFiniteOps: cpu/nonfinite.h in plain code; the staged copy is taken at once.
    void find_nonfinite(const TensorDesc& x, std::uint32_t tag, std::uint64_t* first) override;
    void stage_nonfinite(const std::uint64_t* first) override { staged_nonfinite_ = *first; }
    std::uint64_t staged_nonfinite() const override { return staged_nonfinite_; }

private:
    int threads_;
    std::uint64_t staged_nonfinite_ = kNoNonFinite;
};

// The float32 data of t; throws unless t is F32 (the CPU backend's only float type).
float* cpu_f32(const TensorDesc& t);

// The BLAS library and kernel this build's CPU GEMMs run on ("OpenBLAS 0.3.21 ...,
// kernel SkylakeX (chosen from the CPU's features; OpenBLAS detected Prescott)").
std::string blas_description();
// One line for --version: "cpu: <model> (<vector features>, kernels <isa>), <blas_description()>".
std::string cpu_description();

}  // namespace fp8scope
