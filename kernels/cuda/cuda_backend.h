// The CUDA backend: the Backend interface and its roles (core/backend.h) on one NVIDIA
// GPU, over the cast (quantize.h), the cuBLASLt GEMMs (gemm.h) and the layer ops (ops.h).
//
// Design choices:
// - One stream per backend, every op enqueued on it and asynchronous to the host. The
//   host waits only where it reads a result: synchronize(), copy_to_host/copy_from_host,
//   mean_loss, grad_norm, scaling_amax, analyze, and an AmaxHistory's read/restore
//   (checkpoints and capture steps, not every step). Everything else is stream order.
//   A data-parallel communicator points the backend at its own stream while it issues
//   the casts between its collectives (set_stream), so they overlap backward too.
// - Lanes (RunLanes): the trainer's runs of a step at once, one host thread each. A lane
//   is a stream of its own with everything an op reuses between calls (scratch, the
//   cuBLASLt handle and workspace, the pinned read-back words, the cast reports), so
//   lanes share nothing but the weight mirror (locked) and the device. Every op goes to
//   the calling thread's lane, or to the main stream outside lanes; events order the
//   lanes after the main stream's work when they open and the main stream after theirs
//   when they close.
// - Types: activations BF16 (activation_dtype()); parameters, gradients, AdamW moments,
//   norm statistics, losses and Smooth-SwiGLU scales float32, as on the CPU.
// - Memory: allocate() is cudaMalloc, then a cudaMemsetAsync to zero on the stream, so
//   every later op of this backend (and every copy, which waits for the stream) sees the
//   zeros without a host wait. release() waits for the stream before cudaFree: no op
//   still queued may read freed memory. Scratch buffers grow the same way (wait, free,
//   allocate), which happens in the first steps only.
// - Cast reports: a cast that wants one writes its CastStats into the next slot of one
//   device array; synchronize() copies all pending slots back with one cudaMemcpyAsync
//   into pinned memory and fills the host CastInfo of each (in cast order, so a later
//   cast of the same slot wins); a CastInfo handed to cast() must live until then. The
//   array grows between steps (after a synchronize).
// - cast(): without a recipe BF16 is the GEMM's type: a BF16 x is its own rowwise copy
//   and its transposed view the columnwise copy (cuBLASLt reads transposed BF16); an F32
//   x (a weight) is converted to BF16 once, into the operand's storage. With a recipe,
//   cuda::cast writes both copies' codes and scale_inv grids in one pass (the columnwise
//   copy is the cast of x^T, as the CPU's quantize of the transpose); delayed scaling
//   casts with the history's scale on the device and pushes the amax there. FP4
//   quantizers (no FP4 tensor cores on Hopper) give BF16 copies decode(q) * s_b, exact,
//   with each copy's tensor scale S_dec apart in device memory (cast/fp4_train.h).
// - gemm(): cuBLASLt's FP8 kernels where they exist (per-tensor, 1x128 x 128x128,
//   1x128 x 1x128). MX operands (no MX tensor cores on Hopper) and whatever cuBLASLt
//   refuses are "emulated": both copies dequantized to BF16 and a BF16 GEMM. For MX and
//   power-of-two block scales the BF16 values are exact, so the result is the FP8 GEMM's
//   up to summation order; per-tensor float32 scales round once more (2^-8) there. FP4
//   copies are BF16 already: their GEMM is BF16 x BF16 with alpha = S_dec(A) S_dec(B)
//   read from device memory (cuBLASLt's device pointer mode), nothing rounded in. The
//   choice is cached per problem, so only the first call of a shape pays an exception.
// - The output head (matmul_*) is unquantized: BF16 activations times the float32
//   weight converted to BF16 per call, float32 weight gradients.
// - Host snapshots (checkpoints): a side stream copies the state, starting where the
//   training stream stands, through a device staging buffer when memory allows; until the
//   copy has read them, the first op that writes a copied array waits for it on the device
//   (fence_writes), so the host never waits and later steps cannot tear the copy.
// - Kernel timing: CUPTI's activity records of every kernel, copy and memset, tagged
//   with the op scope they were launched in (kernel_tracer.h); op scopes are also NVTX
//   ranges, so Nsight Systems shows the same ops.
// - analyze() runs on the device (analysis.h): only the figures cross to the host. A
//   request it does not cover (unusual block shapes, top_k > 256) copies the tensor to
//   the host (BF16 widened exactly, a transposed view materialized) for the CPU's analysis.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend.h"

namespace fp8scope {

namespace cuda {
class GemmRunner;
class Analyzer;
class WeightMirror;
struct CastStats;
}  // namespace cuda

class CudaBackend final : public Backend {
public:
    // device: a CUDA device index (make_backend takes the first). threads: host threads of
    // analyze() when it falls back to the host (<= 0: all). Throws cuda::CudaError when the device cannot be used.
    explicit CudaBackend(int device = 0, int threads = 0);
    ~CudaBackend() override;
    CudaBackend(const CudaBackend&) = delete;
    CudaBackend& operator=(const CudaBackend&) = delete;

    Device device() const override { return Device::CUDA; }
    std::string describe() const override;
    DType activation_dtype() const override { return DType::BF16; }
    // The stream the calling thread's ops go to: its lane's, else the main one.
    cudaStream_t stream() const;
    // Points every op issued from now on (outside lanes) at `stream` and returns the one
    // before: a communicator issues the casts between its collectives on its own stream
    // (Communicator::in_order), then points the backend back.
    cudaStream_t set_stream(cudaStream_t stream);
    int device_index() const { return device_; }

    // DeviceMemory: cudaMalloc'd, every copy and fill on the stream.
    void* allocate(std::size_t bytes) override;
    void release(void* p) override;
    void copy_to_host(void* host, const void* src, std::size_t bytes) override;
    void copy_from_host(void* dst, const void* host, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void fill_zero(void* p, std::size_t bytes) override;
    void convert(void* out, DType to, const void* in, DType from, std::int64_t n) override;
    void synchronize() override;
    // Pinned host memory, a side stream and events (cuda_backend_host_snapshot.cpp).
    std::unique_ptr<HostSnapshot> make_host_snapshot(SnapshotStaging staging = SnapshotStaging::Auto) override;
    // Until `copied` completes on another stream, an op of this backend that writes into one
    // of `regions` makes the stream wait for it first (a host snapshot reading them); empty
    // regions: none.
    void fence_writes(std::vector<HostSnapshot::Region> regions, cudaEvent_t copied);

    // LayerOps: ops.h's kernels; the output head's GEMMs in cuda_backend_gemm.cpp.
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

    // Fp8Ops: cuda::cast and the cuBLASLt GEMMs (cuda_backend_gemm.cpp).
    std::unique_ptr<OperandStorage> make_operand_storage() override;
    std::unique_ptr<AmaxHistory> make_amax_history(const DelayedScaling& recipe) override;
    GemmOperand cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) override;
    void gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
              const float* bias, bool accumulate, const GemmEpilogue& epi) override;
    void bias_backward(float* dbias, const TensorDesc& dout) override;

    // OptimizerOps: ops.h's AdamW (which keeps the BF16 weight mirror current) and chunks.h.
    void adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay, std::int64_t n,
               const AdamWParams& p) override;
    double grad_norm(const float* grads, std::int64_t n) override;
    void scale(float* x, float factor, std::int64_t n) override;
    void quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format) override;
    void dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                        Format format) override;

    // AnalysisOps: analysis.h on the device, else the CPU's on a host copy.
    float scaling_amax(const TensorDesc& x) override;
    Analysis analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                     const AnalysisExtras& extras) override;
    // cuda/analysis/output_error.h on the stream (cuda_backend_output_error.cpp).
    OutputError output_error(const TensorDesc& out, const TensorDesc& reference) override;
    // A copy to the host, BF16 widened, a transposed view transposed there.
    std::vector<float> host_values(const TensorDesc& x) override;

    // NonFiniteOps: cuda/ops/nonfinite.h on the stream (cuda_backend_nonfinite.cpp).
    void find_nonfinite(const TensorDesc& x, std::uint32_t tag, std::uint64_t* first) override;
    void stage_nonfinite(const std::uint64_t* first) override;
    std::uint64_t staged_nonfinite() const override;

    // KernelTracing: CUPTI (kernel_tracer.h), op scopes as NVTX ranges as well
    // (cuda_backend_tracing.cpp).
    void begin_op(std::uint64_t scope, const char* name) override;
    void end_op() override;
    std::string trace_kernels(KernelListener* listener) override;
    void flush_kernels() override;
    std::int64_t dropped_kernel_records() const override;

    // RunLanes: a stream and its reused buffers per lane (cuda_backend_lanes.cpp).
    int max_lanes() const override { return kMaxLanes; }
    void open_lanes(int n) override;
    void close_lanes() override;
    void enter_lane(int lane) override;
    void leave_lane() override;
    static constexpr int kMaxLanes = 64;
    int lanes_made() const { return int(lanes_.size()); }  // run lanes so far (not the main one)

    // GEMMs so far that ran emulated (dequantized to BF16) instead of on FP8 tensor cores.
    std::int64_t emulated_gemms() const;

    // Device scratch that grows on demand (contents lost); waits for the stream before it
    // frees, so no queued op reads freed memory. Shared with the operand storage.
    class Scratch {
    public:
        explicit Scratch(CudaBackend& b) : backend_(&b) {}
        ~Scratch();
        Scratch(const Scratch&) = delete;
        Scratch& operator=(const Scratch&) = delete;
        void* grow(std::size_t bytes);
        template <class T>
        T* grow_as(std::size_t n) {
            return static_cast<T*>(grow(n * sizeof(T)));
        }
        void* data() const { return ptr_; }
        void reset();  // frees the memory now

    private:
        CudaBackend* backend_;
        void* ptr_ = nullptr;
        std::size_t bytes_ = 0;
    };

    // A stream and what the ops issued on it reuse from call to call (cuda_backend_lane.h).
    struct Lane;

private:
    Lane& lane() const;  // the calling thread's lane, else the main one
    void* workspace(std::size_t bytes);
    // Throws cuda::GemmUnsupported only for an epilogue cuBLASLt cannot fuse (nothing run).
    void run_gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                  const float* bias, bool accumulate, const GemmEpilogue& epi);
    // A weight (float32) as BF16: its mirrored copy, else converted into `scratch`.
    const std::uint16_t* bf16_weight(const float* w, std::int64_t n, Scratch& scratch);
    // cast() under an FP4 quantizer (cast/fp4_train.h).
    GemmOperand cast_fp4(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage);
    void cast_done(const CastSpec& spec, cuda::CastStats* stats);
    cuda::CastStats* report_slot();
    void free_now(void* p);  // waits for the calling thread's stream, then cudaFree (errors ignored)
    void before_write(const void* dst, std::size_t bytes);  // fence_writes' wait, where dst is fenced

    int device_ = 0;
    std::string name_;
    int major_ = 0, minor_ = 0;
    std::size_t memory_bytes_ = 0;
    // The main lane outside lanes; lanes_[i] is lane i (made when first opened). Declared
    // before every member whose scratch frees through them.
    std::unique_ptr<Lane> main_;
    std::vector<std::unique_ptr<Lane>> lanes_;
    int open_ = 0;          // lanes open now
    bool closing_ = false;  // in the destructor, the device drained
    std::unique_ptr<cuda::Analyzer> analyzer_;
    std::unique_ptr<cuda::WeightMirror> mirror_;  // BF16 weight copies AdamW keeps current

    // fence_writes(): what a host snapshot still reads, and its event.
    std::vector<HostSnapshot::Region> fenced_;
    cudaEvent_t fence_ = nullptr;
};

// cuBLASLt's version as "13.1.0" and the CUDA runtime's as "13.0".
std::string cublaslt_version();
std::string cuda_runtime_version();

}  // namespace fp8scope
