// The compute backend: everything a training step runs on a device, behind one interface
// the engine calls (layer ops, the FP8 cast under a recipe, amax, the FP8 and the float
// GEMM, AdamW, memory). The CPU backend lives in kernels/cpu/, the CUDA one in
// kernels/cuda/; the engine never knows which one it drives.
//
// Operands travel as device-neutral descriptors in the spirit of Transformer Engine's
// tensor: a non-owning TensorDesc (pointer, dtype, shape, device) and, after a cast, a
// GemmOperand (rowwise and columnwise copies with their scale grids and scaling mode).
//
// GEMMs have one shape: out (m,n) = A (m,k) B (n,k)^T, both operands contraction-last
// ("TN", what FP8 tensor cores need). A linear layer's three GEMMs are all of it:
//   fprop  Y  (N,M) = X (N,K)         W (M,K)^T        A = X rowwise,   B = W rowwise
//   dgrad  dX (N,K) = dY (N,M)        (W^T (K,M))^T    A = dY rowwise,  B = W columnwise
//   wgrad  dW (M,K) = dY^T (M,N)      (X^T (K,N))^T    A = dY columnwise, B = X columnwise
//
// Memory: activations are in activation_dtype() (float32 on the CPU, BF16 on a GPU);
// parameters, gradients, AdamW moments and norm statistics are float32 everywhere.
// Pointers into backend memory are valid only for that backend. Calls are ordered as
// issued; results a host reads (losses, norms, cast reports) are ready after synchronize().
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8/analysis.h"
#include "fp8/chunks.h"
#include "fp8/recipe.h"
#include "fp8/scaling.h"

namespace fp8scope {

enum class Device : std::uint8_t { CPU, CUDA };
const char* device_name(Device d);  // "cpu", "cuda"

enum class DType : std::uint8_t { F32, BF16, E4M3, E5M2, E8M0 };
std::size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", "e4m3", "e5m2", "e8m0"

// A pointer into an activation buffer: element offsets scale by the buffer's dtype, so
// the model carves and indexes its activations the same way on every backend.
struct ActPtr {
    std::byte* ptr = nullptr;
    DType dtype = DType::F32;

    ActPtr operator+(std::int64_t elements) const {
        return {ptr ? ptr + elements * std::int64_t(dtype_size(dtype)) : nullptr, dtype};
    }
    explicit operator bool() const { return ptr != nullptr; }
    float* f32() const;  // the CPU backend's view; throws unless dtype is F32
};

// What a GEMM does with its result besides the bias; aux has the output's shape and type:
//   Gelu:         aux = A B^T + bias (the GELU's input), out = gelu(aux) (the tanh form of
//                 gelu_forward)
//   GeluBackward: out = gelu'(aux) * (A B^T), aux holding the GELU's input (no bias)
// A GPU does them in cuBLASLt's epilogue where that is faster than a pass of their own
// (GELU on the float32 result before it is rounded).
struct GemmEpilogue {
    enum class Kind : std::uint8_t { None, Gelu, GeluBackward };
    Kind kind = Kind::None;
    ActPtr aux;
};

// A non-owning 2-D row-major view of backend memory; `transposed` marks a view of the
// transpose of data stored as (cols, rows), so a GEMM can read it without a copy.
struct TensorDesc {
    void* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0, cols = 0;
    Device device = Device::CPU;
    bool transposed = false;

    std::int64_t numel() const { return rows * cols; }
    static TensorDesc of(ActPtr p, std::int64_t rows, std::int64_t cols, Device d) {
        return {p.ptr, p.dtype, rows, cols, d, false};
    }
    static TensorDesc of(const float* p, std::int64_t rows, std::int64_t cols, Device d) {
        return {const_cast<float*>(p), DType::F32, rows, cols, d, false};
    }
};

enum class ScalingMode : std::uint8_t {
    None,       // high precision: the GEMM's own type (float32 on the CPU, BF16 on a GPU)
    PerTensor,  // one scale (delayed or current)
    Block,      // block_rows x block_cols blocks (1x128 tiles, 128x128 blocks)
    MX,         // 1 x block with E8M0 scales
};

// A GEMM operand after the cast (Transformer Engine's tensor): the values the GEMM reads
// in a rowwise copy (rows, cols) and a columnwise copy (cols, rows) = the transpose, each
// quantized along its own last dimension, with one scale_inv per block. A copy that was
// not asked for has null data. `emulated`: the copies hold the dequantized values in
// float32 (bit-exact FP8 values times their scale_inv) instead of codes.
struct GemmOperand {
    ScalingMode mode = ScalingMode::None;
    Format format = Format::E4M3;
    int block_rows = 0, block_cols = 0;  // of the rowwise copy
    TensorDesc rowwise, columnwise;
    // float32 grids, empty when None; a backend may store one transposed (the CUDA backend's
    // 1x128 grids, in the layout its GEMM reads)
    TensorDesc rowwise_scale_inv, columnwise_scale_inv;
    bool emulated = false;
};

enum class Copy : std::uint8_t { Rowwise, Columnwise };

// Delayed scaling's state of one operand (its amax history and the scale of the next
// cast), kept in the backend's memory so a device can update it without the host.
class AmaxHistory {
public:
    virtual ~AmaxHistory() = default;
    virtual const DelayedScaling& recipe() const = 0;
    // The history (oldest first) and the next scale, as the host sees them (a device
    // copies them back: for checkpoints and capture steps, not every step).
    virtual DelayedState read() const = 0;
    virtual void restore(const DelayedState& state) = 0;
    // DelayedState::push of the amax at `amax` (backend memory): a data-parallel step
    // pushes the maximum over ranks of the amaxes its casts wrote to CastSpec::amax_out.
    virtual void push(const float* amax) = 0;
};

// Buffers a backend keeps for one cast operand (codes, copies, scale grids); grown on
// demand and reused from step to step.
class OperandStorage {
public:
    virtual ~OperandStorage() = default;
};

struct CastSpec {
    const Recipe* recipe = nullptr;  // null: high precision (the GEMM's own type)
    AmaxHistory* history = nullptr;  // delayed scaling: casts with its scale
    bool push = false;               // delayed scaling: then pushes this cast's amax
    bool rowwise = true, columnwise = false;
    CastInfo* report = nullptr;      // amax, scale, overflow of the rowwise cast (null: not
                                     // wanted); filled by synchronize()
    float* amax_out = nullptr;       // backend memory: receives the rowwise cast's scaling amax
};

// Where AdamW's weight decay applies: parameters [begin, end) of the flat array. A list of
// runs is sorted and disjoint (check_decay_runs); outside every run nothing decays.
struct DecayRun {
    std::int64_t begin = 0, end = 0;
    bool operator==(const DecayRun& o) const { return begin == o.begin && end == o.end; }
};

// Throws std::invalid_argument naming the first run that is empty, out of [0, n), or not
// after the run before it.
void check_decay_runs(const std::vector<DecayRun>& runs, std::int64_t n);

struct AdamWParams {
    float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0;
    float bias_correction1 = 1, bias_correction2 = 1;  // 1 - beta^t, rounded once
    // Each gradient is first multiplied by this (gradient clipping's factor), in the same
    // pass: the same bits as scaling the gradients beforehand, one read and write fewer.
    float grad_scale = 1;
};

// A kernel, copy or memset a device ran, on the host's steady clock (util/clock.h), as a
// kernel tracer (CUPTI) reports it: `scope` is the op scope (Backend::begin_op) it was
// launched in, 0 when none.
struct KernelTiming {
    enum class Kind : std::uint8_t { Kernel = 1, Memcpy = 2, Memset = 3 };
    Kind kind = Kind::Kernel;
    std::string_view name;  // the kernel's demangled name; "memcpy HtoD", "memset", ...
    int device = 0;
    std::uint32_t stream = 0;
    std::int64_t start_ns = 0, end_ns = 0;
    std::int64_t bytes = 0;  // copies and memsets
    std::uint64_t scope = 0;
};

// Receives kernel timings in batches, from the tracer's thread.
class KernelListener {
public:
    virtual ~KernelListener() = default;
    virtual void on_kernels(const KernelTiming* timings, std::size_t n) = 0;
};

class Backend {
public:
    virtual ~Backend() = default;

    virtual Device device() const = 0;
    // One line naming the device and its libraries ("cpu: AMD EPYC, 2 threads, OpenBLAS ...").
    virtual std::string describe() const = 0;
    virtual DType activation_dtype() const = 0;

    // --- memory ----------------------------------------------------------------------
    virtual void* allocate(std::size_t bytes) = 0;  // zero-filled
    virtual void release(void* p) = 0;
    virtual void copy_to_host(void* host, const void* src, std::size_t bytes) = 0;
    virtual void copy_from_host(void* dst, const void* host, std::size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void fill_zero(void* p, std::size_t bytes) = 0;
    // out (n, `to`) = in (n, `from`): float32 <-> BF16 (round to nearest even, NaN kept).
    virtual void convert(void* out, DType to, const void* in, DType from, std::int64_t n) = 0;
    virtual void synchronize() = 0;

    // --- layer ops (B batch, T time, C channels, N = B*T rows, V vocab, NH heads) -----
    // out (B,T,C) = wte[tokens] (V,C) + wpe[t] (maxT,C); tokens in backend memory.
    virtual void embedding_forward(ActPtr out, const std::int32_t* tokens, const float* wte, const float* wpe,
                                   int B, int T, int C) = 0;
    // dwte, dwpe += dout scattered by token and position (deterministic order).
    virtual void embedding_backward(float* dwte, float* dwpe, ActPtr dout, const std::int32_t* tokens, int B,
                                    int T, int C) = 0;
    // LayerNorm (mean may not be null) or, with mean == bias == null, RMSNorm. Backward
    // adds into dinp and overwrites dweight, dbias.
    virtual void layernorm_forward(ActPtr out, float* mean, float* rstd, ActPtr inp, const float* weight,
                                   const float* bias, std::int64_t N, int C) = 0;
    virtual void layernorm_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                    const float* weight, const float* mean, const float* rstd, std::int64_t N,
                                    int C) = 0;
    virtual void rmsnorm_forward(ActPtr out, float* rstd, ActPtr inp, const float* weight, std::int64_t N,
                                 int C) = 0;
    virtual void rmsnorm_backward(ActPtr dinp, float* dweight, ActPtr dout, ActPtr inp, const float* weight,
                                  const float* rstd, std::int64_t N, int C) = 0;
    // Causal attention over qkv (B,T,3C) = [q|k|v]; `att` keeps what backward needs
    // (attention_saved() elements); backward also gets the forward's output `out`
    // (flash attention's rowsum(dout * out)).
    virtual std::int64_t attention_saved(int B, int T, int NH) const = 0;
    virtual void attention_forward(ActPtr out, ActPtr att, ActPtr qkv, int B, int T, int C, int NH) = 0;
    virtual void attention_backward(ActPtr dqkv, ActPtr dout, ActPtr qkv, ActPtr out, ActPtr att, int B, int T,
                                    int C, int NH) = 0;
    virtual void gelu_forward(ActPtr out, ActPtr inp, std::int64_t n) = 0;
    virtual void gelu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t n) = 0;
    virtual void swiglu_forward(ActPtr out, ActPtr inp, std::int64_t N, int H) = 0;
    virtual void swiglu_backward(ActPtr dinp, ActPtr inp, ActPtr dout, std::int64_t N, int H) = 0;
    // Smooth-SwiGLU: scales (H) = 2^-floor(log2 absmax) of each channel of h (N,H).
    virtual void smooth_swiglu_scales(float* scales, ActPtr h, std::int64_t N, int H) = 0;
    // out (rows,cols) = in with column c multiplied by s[c], or divided when `inverse`.
    virtual void scale_columns(const TensorDesc& out, const TensorDesc& in, const float* s, bool inverse) = 0;
    virtual void add(ActPtr out, ActPtr a, ActPtr b, std::int64_t n) = 0;
    // probs (N,V) = softmax(logits), may alias; losses (N) = -log probs[target].
    virtual void softmax_ce_forward(ActPtr probs, float* losses, ActPtr logits, const std::int32_t* targets,
                                    std::int64_t N, int V) = 0;
    // Mean of losses (N), summed in row order in double (waits for the device).
    virtual float mean_loss(const float* losses, std::int64_t N) = 0;
    // dlogits (N,V) = (probs - onehot) / mean_over, may alias probs. mean_over: the rows the
    // loss is a mean over: N, or a data-parallel job's rows of all ranks (then the ranks'
    // gradients add up to the whole batch's, and each rank's dlogits rows are the bits one
    // process computes for them).
    virtual void softmax_ce_backward(ActPtr dlogits, ActPtr probs, const std::int32_t* targets, std::int64_t N,
                                     int V, std::int64_t mean_over) = 0;

    // --- GEMMs -----------------------------------------------------------------------
    // The unquantized linear of the output head: out (N,M) = inp (N,K) weight (M,K)^T + bias;
    // backward: dinp = dout weight, dweight = dout^T inp, dbias = column sums (each may be null).
    virtual void matmul_forward(ActPtr out, ActPtr inp, const float* weight, const float* bias, std::int64_t N,
                                std::int64_t K, std::int64_t M) = 0;
    virtual void matmul_backward(ActPtr dinp, float* dweight, float* dbias, ActPtr dout, ActPtr inp,
                                 const float* weight, std::int64_t N, std::int64_t K, std::int64_t M) = 0;

    virtual std::unique_ptr<OperandStorage> make_operand_storage() = 0;
    virtual std::unique_ptr<AmaxHistory> make_amax_history(const DelayedScaling& recipe) = 0;
    // The cast of x (rows, cols) under spec: the rowwise and/or columnwise copy the GEMMs
    // read, in `storage` (or aliasing x when no cast is needed).
    virtual GemmOperand cast(const TensorDesc& x, const CastSpec& spec, OperandStorage& storage) = 0;
    // out (m,n) = A (m,k) B (n,k)^T [+ bias (n)] [+ out when accumulate], A and B the
    // chosen copies of their operands, then the epilogue, if any.
    virtual void gemm(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                      const float* bias, bool accumulate, const GemmEpilogue& epi) = 0;
    // dbias (M) = sum over rows of dout (N,M).
    virtual void bias_backward(float* dbias, const TensorDesc& dout) = 0;
    // gemm() with its epilogue as a pass of its own (gelu_forward, gelu_backward): the
    // same arithmetic as the CPU's, for a backend or a problem without the fused form.
    void gemm_then_epilogue(const GemmOperand& a, Copy ca, const GemmOperand& b, Copy cb, const TensorDesc& out,
                              const float* bias, bool accumulate, const GemmEpilogue& epi);

    // --- optimizer -------------------------------------------------------------------
    // AdamW on n float32 parameters; weight decay applies inside the `decay` runs (host
    // memory, check_decay_runs) and nowhere else.
    virtual void adamw(float* params, const float* grads, float* m, float* v, const std::vector<DecayRun>& decay,
                       std::int64_t n, const AdamWParams& p) = 0;
    // Global L2 norm of n gradients, bitwise the same for any thread count (waits).
    virtual double grad_norm(const float* grads, std::int64_t n) = 0;
    virtual void scale(float* x, float factor, std::int64_t n) = 0;

    // --- FP8 gradient sums (fp8/chunks.h) ------------------------------------------
    // slots (layout.bytes()) = x (layout.n) cast to `format` chunk by chunk, each chunk with
    // the power-of-two scale of its own amax, written into its slot's header.
    virtual void quantize_chunks(void* slots, const float* x, const ChunkLayout& layout, Format format) = 0;
    // out (n) = the sum over k < count of the first n values of slot k (slots `slot_bytes`
    // apart), each decode(code) * scale_inv, added in float32 in the order of k: the same
    // bits on every backend (a NaN may differ in its payload).
    virtual void dequantize_sum(float* out, const void* slots, std::int64_t slot_bytes, int count, std::int64_t n,
                                Format format) = 0;

    // --- kernel timing ---------------------------------------------------------------
    // Brackets the host code of one op: a device backend names it for profilers (an NVTX
    // range) and tags the kernels launched inside with `scope` (nonzero). Scopes nest.
    virtual void begin_op(std::uint64_t /*scope*/, const char* /*name*/) {}
    virtual void end_op() {}
    // Starts reporting every kernel, copy and memset to `listener` (nullptr stops).
    // Returns "" when on, else why not and what fixes it; training goes on either way.
    virtual std::string trace_kernels(KernelListener* /*listener*/) { return "the backend runs no kernels"; }
    // Reports what has run so far (waits for the device) and the records the tracer
    // dropped since it started.
    virtual void flush_kernels() {}
    virtual std::int64_t dropped_kernel_records() const { return 0; }

    // --- statistics ------------------------------------------------------------------
    // NaN-ignoring, Inf-including max |x| (waits).
    virtual float scaling_amax(const TensorDesc& x) = 0;
    // The full analysis of one tensor (fp8/analysis.h) under `recipes` (waits).
    virtual Analysis analyze(const TensorDesc& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                             const AnalysisExtras& extras) = 0;
};

// Owns one allocation of backend memory, of a fixed type; grows on demand (contents lost).
template <class T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(Backend& b, std::size_t n = 0) : backend_(&b) { resize(n); }
    ~DeviceBuffer() { reset(); }
    DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        if (this != &o) {
            reset();
            backend_ = o.backend_;
            ptr_ = o.ptr_;
            size_ = o.size_;
            o.ptr_ = nullptr;
            o.size_ = 0;
        }
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void bind(Backend& b) { reset(), backend_ = &b; }
    // At least n elements (zero-filled when it grows).
    T* grow(std::size_t n) {
        if (n > size_) resize(n);
        return ptr_;
    }
    void resize(std::size_t n) {
        reset();
        if (n) ptr_ = static_cast<T*>(backend_->allocate(n * sizeof(T)));
        size_ = n;
    }
    void reset() {
        if (ptr_) backend_->release(ptr_);
        ptr_ = nullptr;
        size_ = 0;
    }
    T* data() const { return ptr_; }
    std::size_t size() const { return size_; }

private:
    Backend* backend_ = nullptr;
    T* ptr_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace fp8scope
