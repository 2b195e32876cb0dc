// GemmRunner (gemm.h): the backend's GEMM through cuBLASLt, with a plan cache so that a
// steady-state call creates no descriptor and asks no heuristic.
//
// Row-major to cuBLAS's column-major. A row-major (r, c) matrix is, read column-major,
// its transpose (c, r) with leading dimension c. So
//   out (m,n) row-major  ==  D (n,m) column-major, ld n,   and D = out^T = B A^T,
// which cuBLAS computes as D = op(A') op(B') with
//   A' = our B: stored (n,k) row-major = (k,n) column-major, ld k; op T gives B (n,k)
//   B' = our A: stored (m,k) row-major = (k,m) column-major, ld k; op N gives A^T (k,m)
// i.e. cuBLAS's m' = n, n' = m, k' = k in the "TN" form FP8 kernels need. A transposed
// view (stored (k, rows)) reads column-major as (rows, k), ld rows: op flips to N for A'
// and to T for B'. Everything cuBLAS calls "A" is our B, including its scale pointer and
// scale mode, and the epilogue's bias (one per row of D) is our bias (n).
#include <cublasLt.h>

#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "cuda/gemm/gemm.h"
#include "cuda/gemm/internal.h"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {

using detail::ceil_div;

namespace detail {

cudaDataType_t cuda_data_type(DType t) {
    switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::E4M3: return CUDA_R_8F_E4M3;
    case DType::E5M2: return CUDA_R_8F_E5M2;
    case DType::E8M0: return CUDA_R_8F_UE8M0;
    }
    return CUDA_R_32F;
}

cublasLtMatmulMatrixScale_t cublas_scale_mode(GemmScaling s) {
    switch (s) {
    case GemmScaling::Tile1x128: return CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    case GemmScaling::Block128: return CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    case GemmScaling::None:
    case GemmScaling::PerTensor: break;
    }
    return CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
}

std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
    // cuBLASLt wants the attribute's exact size: ask for it, then read it into a zeroed
    // 64-bit word (small non-negative values, little-endian).
    auto get = [&](cublasLtMatmulAlgoConfigAttributes_t attr) {
        std::size_t size = 0, written = 0;
        std::uint64_t v = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, nullptr, 0, &size) != CUBLAS_STATUS_SUCCESS ||
            size > sizeof(v) ||
            cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, size, &written) != CUBLAS_STATUS_SUCCESS)
            return std::int64_t(-1);
        return std::int64_t(v);
    };
    std::ostringstream s;
    s << "algo " << get(CUBLASLT_ALGO_CONFIG_ID) << " tile " << get(CUBLASLT_ALGO_CONFIG_TILE_ID) << " stages "
      << get(CUBLASLT_ALGO_CONFIG_STAGES_ID) << " splitK " << get(CUBLASLT_ALGO_CONFIG_SPLITK_NUM) << " swizzle "
      << get(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING) << " custom " << get(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)
      << " cluster " << get(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
    return s.str();
}

}  // namespace detail

namespace {

bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }
bool is_block(GemmScaling s) { return s == GemmScaling::Tile1x128 || s == GemmScaling::Block128; }

// The largest power of two (up to 256) dividing the address: what the heuristic is told,
// so a plan never meets a pointer less aligned than the one it was chosen for.
std::uint32_t alignment(const void* p) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    std::uint32_t al = 256;
    while (al > 1 && a % al != 0) al /= 2;
    return al;
}

constexpr std::size_t kAlign = 256;
std::size_t round_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

struct PlanKey {
    std::int64_t m, n, k;
    DType a_type, b_type, out_type;
    GemmScaling a_scaling, b_scaling;
    bool a_transposed, b_transposed, bias, accumulate, fast_accum, device_alpha;
    GemmGelu gelu;
    std::uint32_t a_align, b_align, out_align, aux_align;

    bool operator==(const PlanKey& o) const {
        return m == o.m && n == o.n && k == o.k && a_type == o.a_type && b_type == o.b_type &&
               out_type == o.out_type && a_scaling == o.a_scaling && b_scaling == o.b_scaling &&
               a_transposed == o.a_transposed && b_transposed == o.b_transposed && bias == o.bias &&
               accumulate == o.accumulate && fast_accum == o.fast_accum && device_alpha == o.device_alpha &&
               gelu == o.gelu &&
               a_align == o.a_align && b_align == o.b_align && out_align == o.out_align && aux_align == o.aux_align;
    }
};

struct PlanKeyHash {
    std::size_t operator()(const PlanKey& key) const {
        std::size_t h = 1469598103934665603ull;
        auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
        mix(std::uint64_t(key.m)), mix(std::uint64_t(key.n)), mix(std::uint64_t(key.k));
        mix(std::uint64_t(key.a_type) | std::uint64_t(key.b_type) << 8 | std::uint64_t(key.out_type) << 16 |
            std::uint64_t(key.a_scaling) << 24 | std::uint64_t(key.b_scaling) << 32);
        mix(std::uint64_t(key.a_transposed) | std::uint64_t(key.b_transposed) << 1 | std::uint64_t(key.bias) << 2 |
            std::uint64_t(key.accumulate) << 3 | std::uint64_t(key.fast_accum) << 4 | std::uint64_t(key.gelu) << 5 |
            std::uint64_t(key.device_alpha) << 8);
        mix(std::uint64_t(key.a_align) | std::uint64_t(key.b_align) << 16 | std::uint64_t(key.out_align) << 32 |
            std::uint64_t(key.aux_align) << 48);
        return h;
    }
};

// alpha and beta from device memory: an operand with a tensor scale (gemm.h).
bool device_alpha(const GemmArgs& g) { return g.a.tensor_scale_inv || g.b.tensor_scale_inv; }

PlanKey key_of(const GemmArgs& g) {
    return {g.m,           g.n,          g.k,          g.a.dtype,          g.b.dtype,
            g.out_dtype,   g.a.scaling,  g.b.scaling,  g.a.transposed,     g.b.transposed,
            g.bias != nullptr, g.accumulate, g.fast_accum, device_alpha(g), g.gelu, alignment(g.a.data),
            alignment(g.b.data), alignment(g.out), alignment(g.gelu_aux)};
}

// A cached problem: descriptor, layouts (cuBLAS's A = our B, B = our A, C = D = out) and
// the chosen algorithm; or why cuBLASLt refused it.
struct Plan {
    bool ok = false;
    std::string why;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
    cublasLtMatmulAlgo_t algo{};

    Plan() = default;
    Plan(const Plan&) = delete;
    Plan& operator=(const Plan&) = delete;
    ~Plan() {  // destructors do not throw: statuses ignored
        if (ld) cublasLtMatrixLayoutDestroy(ld);
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (la) cublasLtMatrixLayoutDestroy(la);
        if (desc) cublasLtMatmulDescDestroy(desc);
    }
};

template <class T>
void set_attr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)));
}

void check_args(const GemmArgs& g) {
    if (g.m < 0 || g.n < 0 || g.k < 0) throw std::invalid_argument("gemm: negative dimension");
    if (g.m == 0 || g.n == 0) return;
    if (g.k == 0) throw std::invalid_argument("gemm: k == 0");
    if (!g.a.data || !g.b.data || !g.out) throw std::invalid_argument("gemm: null operand or output");
    for (const GemmInput* in : {&g.a, &g.b})
        if (in->scaling != GemmScaling::None && !in->scale_inv)
            throw std::invalid_argument("gemm: scaled operand without scale_inv");
}

// Pointers a call hands cuBLASLt: the scale grids and bias as prepared for this call.
struct CallPointers {
    const float* a_scale = nullptr;
    const float* b_scale = nullptr;
    const void* bias = nullptr;
    const float* alpha_beta = nullptr;  // device {alpha, beta}; null: the host's
};

}  // namespace

struct GemmRunner::Impl {
    cublasLtHandle_t handle = nullptr;
    cudaStream_t stream = nullptr;
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
    // Scale grids in cuBLASLt's layout and the staged bias; grown on demand. Reuse from
    // one call to the next is safe because both run on the one stream, in order.
    void* scratch = nullptr;
    std::size_t scratch_bytes = 0;
    std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> plans;
    std::size_t heuristic_queries = 0;

    ~Impl() {
        plans.clear();
        if (scratch) cudaFree(scratch);
        if (workspace) cudaFree(workspace);
        if (handle) cublasLtDestroy(handle);
    }

    void* grow_scratch(std::size_t bytes) {
        if (bytes > scratch_bytes) {
            if (scratch) FP8SCOPE_CUDA_CHECK(cudaFree(scratch));  // waits for the GEMMs reading it
            scratch = nullptr;
            scratch_bytes = 0;
            FP8SCOPE_CUDA_CHECK(cudaMalloc(&scratch, bytes));
            scratch_bytes = bytes;
        }
        return scratch;
    }

    CallPointers prepare(const GemmArgs& g);
    Plan& plan(const GemmArgs& g, const CallPointers& p);
    void set_pointers(Plan& plan, const GemmArgs& g, const CallPointers& p);
};

// Rearranges the scale grids (where cuBLASLt's layout differs from ours) and stages the
// bias, in one launch.
CallPointers GemmRunner::Impl::prepare(const GemmArgs& g) {
    CallPointers p{g.a.scale_inv, g.b.scale_inv, g.bias};
    detail::ScaleJob jobs[2];
    detail::BiasJob bias_job;
    detail::AlphaJob alpha_job;
    std::size_t offsets[4] = {0, 0, 0, 0}, total = 0;

    const GemmInput* ins[2] = {&g.a, &g.b};
    const std::int64_t rows[2] = {g.m, g.n};
    for (int i = 0; i < 2; ++i) {
        const GemmInput& in = *ins[i];
        if (!is_block(in.scaling) || in.scale_inv_gemm_ready) continue;
        const std::int64_t KB = ceil_div(g.k, 128);
        // Already in cuBLASLt's layout: a single K-block of 1x128 tiles (the transpose of a
        // column is itself, rows % 8 == 0 so no padding), or 128x128 blocks whose row
        // length KB is a multiple of 4; and 16-byte aligned.
        const bool same = in.scaling == GemmScaling::Tile1x128 ? KB == 1 : KB % 4 == 0;
        if (same && alignment(in.scale_inv) >= 16) continue;
        jobs[i] = {nullptr, in.scale_inv, in.scaling, rows[i], g.k};
        offsets[i] = total;
        total += round_up(sizeof(float) * std::size_t(gemm_ready_scale_count(in.scaling, rows[i], g.k)));
    }
    // FP8 kernels read a BF16 bias; the others one of the output type, staged for its
    // alignment (cheap: n elements).
    if (g.bias) {
        bias_job.to_bf16 = is_fp8(g.a.dtype) || g.out_dtype == DType::BF16;
        bias_job.src = g.bias;
        bias_job.n = g.n;
        offsets[2] = total;
        total += round_up(std::size_t(g.n) * (bias_job.to_bf16 ? 2 : 4));
    }
    if (device_alpha(g)) {
        alpha_job = {nullptr, g.a.tensor_scale_inv, g.b.tensor_scale_inv, g.accumulate ? 1.0f : 0.0f};
        offsets[3] = total;
        total += round_up(2 * sizeof(float));
    }
    if (total == 0) return p;

    auto* base = static_cast<char*>(grow_scratch(total));
    for (int i = 0; i < 2; ++i)
        if (jobs[i].scaling != GemmScaling::None) jobs[i].dst = reinterpret_cast<float*>(base + offsets[i]);
    if (g.bias) bias_job.dst = base + offsets[2];
    if (device_alpha(g)) alpha_job.dst = reinterpret_cast<float*>(base + offsets[3]);
    detail::prepare_gemm_inputs(jobs[0], jobs[1], bias_job, stream, alpha_job);

    if (jobs[0].dst) p.a_scale = jobs[0].dst;
    if (jobs[1].dst) p.b_scale = jobs[1].dst;
    if (g.bias) p.bias = bias_job.dst;
    p.alpha_beta = alpha_job.dst;
    return p;
}

void GemmRunner::Impl::set_pointers(Plan& pl, const GemmArgs& g, const CallPointers& p) {
    if (is_fp8(g.a.dtype)) {
        set_attr(pl.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(p.b_scale));
        set_attr(pl.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(p.a_scale));
    }
    if (g.bias) set_attr(pl.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias);
    if (g.gelu != GemmGelu::None) set_attr(pl.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.gelu_aux);
}

Plan& GemmRunner::Impl::plan(const GemmArgs& g, const CallPointers& p) {
    const PlanKey key = key_of(g);
    if (auto it = plans.find(key); it != plans.end()) return *it->second;

    auto pl = std::make_unique<Plan>();
    const bool fp8 = is_fp8(g.a.dtype);
    const cudaDataType_t a_type = detail::cuda_data_type(g.a.dtype), b_type = detail::cuda_data_type(g.b.dtype);
    const cudaDataType_t out_type = detail::cuda_data_type(g.out_dtype);

    // CUBLAS_COMPUTE_32F (never _FAST_TF32): F32 x F32 stays exact float32.
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&pl->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_a = g.b.transposed ? CUBLAS_OP_N : CUBLAS_OP_T;  // cuBLAS A = our B
    const cublasOperation_t op_b = g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS B = our A
    set_attr(pl->desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
    set_attr(pl->desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
    if (fp8) {
        set_attr(pl->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, std::int8_t(g.fast_accum ? 1 : 0));
        set_attr(pl->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, std::int32_t(detail::cublas_scale_mode(g.b.scaling)));
        set_attr(pl->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, std::int32_t(detail::cublas_scale_mode(g.a.scaling)));
    }
    if (g.bias) {
        const bool bf16_bias = fp8 || g.out_dtype == DType::BF16;
        set_attr(pl->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, std::int32_t(bf16_bias ? CUDA_R_16BF : CUDA_R_32F));
    }
    const cublasLtEpilogue_t epilogue =
        g.gelu == GemmGelu::Forward ? (g.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX)
        : g.bias                    ? CUBLASLT_EPILOGUE_BIAS
                                    : CUBLASLT_EPILOGUE_DEFAULT;
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) set_attr(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
    if (key.device_alpha)
        set_attr(pl->desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, std::int32_t(CUBLASLT_POINTER_MODE_DEVICE));
    if (g.gelu != GemmGelu::None)  // aux is (n, m) column-major like D
        set_attr(pl->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, std::int64_t(g.n));
    // The heuristic sees the real pointers (scaled kernels are chosen by their presence).
    set_pointers(*pl, g, p);

    // Stored column-major matrices: rows, cols, ld.
    const std::uint64_t n = std::uint64_t(g.n), m = std::uint64_t(g.m), k = std::uint64_t(g.k);
    if (g.b.transposed)
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl->la, b_type, n, k, std::int64_t(n)));
    else
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl->la, b_type, k, n, std::int64_t(k)));
    if (g.a.transposed)
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl->lb, a_type, m, k, std::int64_t(m)));
    else
        FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl->lb, a_type, k, m, std::int64_t(k)));
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&pl->ld, out_type, n, m, std::int64_t(n)));

    cublasLtMatmulPreference_t pref = nullptr;
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const std::uint64_t ws = workspace_bytes;
    const std::uint32_t align_a = key.b_align, align_b = key.a_align, align_d = key.out_align;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                                  sizeof(align_a));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                                  sizeof(align_b));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d,
                                                  sizeof(align_d));
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d,
                                                  sizeof(align_d));
    // Split-K partial sums in the output type (the OUTPUT_TYPE and INPLACE schemes) would
    // round a BF16 output at every partial, far past one rounding of the float32 sum:
    // only float32 partials (or no split) are allowed.
    const std::uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions,
                                                  sizeof(reductions));
    if (st == CUBLAS_STATUS_SUCCESS) {
        ++heuristic_queries;
        st = cublasLtMatmulAlgoGetHeuristic(handle, pl->desc, pl->la, pl->lb, pl->ld, pl->ld, pref, 1, &result,
                                            &found);
    }
    cublasLtMatmulPreferenceDestroy(pref);

    if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
        pl->ok = true;
        pl->algo = result.algo;
    } else if (st == CUBLAS_STATUS_SUCCESS || st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_INVALID_VALUE) {
        pl->why = std::string("cuBLASLt has no algorithm for this GEMM (") +
                  (st == CUBLAS_STATUS_SUCCESS ? "no heuristic result" : cublasLtGetStatusString(st)) + ")";
    } else {
        fail("cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__, cublasLtGetStatusString(st));
    }
    return *plans.emplace(key, std::move(pl)).first->second;
}

const char* gemm_scaling_name(GemmScaling s) {
    switch (s) {
    case GemmScaling::None: return "none";
    case GemmScaling::PerTensor: return "tensor";
    case GemmScaling::Tile1x128: return "1x128";
    case GemmScaling::Block128: return "128x128";
    }
    return "?";
}

GemmRunner::GemmRunner(cudaStream_t stream, std::size_t workspace_bytes) : impl_(std::make_unique<Impl>()) {
    impl_->stream = stream;
    FP8SCOPE_CUBLAS_CHECK(cublasLtCreate(&impl_->handle));
    if (workspace_bytes) FP8SCOPE_CUDA_CHECK(cudaMalloc(&impl_->workspace, workspace_bytes));
    impl_->workspace_bytes = workspace_bytes;
}

GemmRunner::~GemmRunner() = default;

void GemmRunner::set_stream(cudaStream_t stream) { impl_->stream = stream; }
cudaStream_t GemmRunner::stream() const { return impl_->stream; }
std::size_t GemmRunner::plans() const { return impl_->plans.size(); }
std::size_t GemmRunner::heuristic_queries() const { return impl_->heuristic_queries; }

std::string GemmRunner::check(const GemmArgs& g) {
    const GemmInput &a = g.a, &b = g.b;
    if (g.out_dtype != DType::BF16 && g.out_dtype != DType::F32) return "output must be BF16 or F32";
    // Measured on an H200 (cuBLASLt 13.1): BF16 x BF16 kernels round A B to BF16 before
    // adding a BF16 C, an error of the size of A B, not of the sum. Accumulation happens
    // into float32 (weight gradients) only.
    if (g.accumulate && g.out_dtype == DType::BF16) return "accumulating into a BF16 output (use float32)";
    if (g.gelu != GemmGelu::None) {
        if (g.out_dtype != DType::BF16 || g.accumulate) return "GELU epilogues write a fresh BF16 output";
        if (!g.gelu_aux || alignment(g.gelu_aux) < 16) return "the GELU epilogue needs a 16-byte aligned aux";
        if (g.n % 8 != 0) return "the GELU epilogue needs n % 8 == 0, n = " + std::to_string(g.n);
    }
    const bool fp8 = is_fp8(a.dtype);
    if (fp8 != is_fp8(b.dtype)) return "FP8 operands come in pairs (no FP8 x BF16/F32)";
    if (!fp8) {
        if (a.dtype != b.dtype || (a.dtype != DType::BF16 && a.dtype != DType::F32))
            return "unscaled operands must be both BF16 or both F32";
        if (a.scaling != GemmScaling::None || b.scaling != GemmScaling::None)
            return "BF16/F32 operands take no scales";
        if (a.dtype == DType::F32 && g.out_dtype != DType::F32) return "F32 operands give an F32 output";
        return "";
    }
    if (a.tensor_scale_inv || b.tensor_scale_inv) return "FP8 operands take their scales as scale_inv";
    if (a.dtype == DType::E5M2 && b.dtype == DType::E5M2) return "E5M2 x E5M2 has no cuBLASLt kernel";
    if (a.scaling == GemmScaling::None || b.scaling == GemmScaling::None) return "FP8 operands need a scaling";
    if ((a.scaling == GemmScaling::PerTensor) != (b.scaling == GemmScaling::PerTensor))
        return "per-tensor scaling does not mix with blockwise scaling";
    if (a.scaling == GemmScaling::Block128 && b.scaling == GemmScaling::Block128)
        return "128x128 x 128x128 block scaling has no cuBLASLt kernel on Hopper";
    if (a.transposed || b.transposed) return "FP8 kernels read TN only (use the operand's other copy)";
    if (g.k % 16 != 0) return "FP8 needs k % 16 == 0 (16-byte rows), k = " + std::to_string(g.k);
    const std::int64_t out_align = g.out_dtype == DType::BF16 ? 8 : 4;
    if (g.n % out_align != 0)
        return "FP8 needs n % " + std::to_string(out_align) + " == 0 (16-byte output rows), n = " + std::to_string(g.n);
    if (alignment(a.data) < 16 || alignment(b.data) < 16 || alignment(g.out) < 16)
        return "FP8 needs 16-byte aligned operands and output";
    if (is_block(a.scaling)) {
        if (g.m % 8 != 0 || g.n % 8 != 0)
            return "block-scaled FP8 needs m % 8 == 0 and n % 8 == 0, m = " + std::to_string(g.m) +
                   ", n = " + std::to_string(g.n);
        if (g.fast_accum) return "block-scaled FP8 always promotes its accumulation (fast_accum refused)";
    }
    return "";
}

void GemmRunner::gemm(const GemmArgs& g) {
    check_args(g);
    if (g.m == 0 || g.n == 0) return;
    if (std::string why = check(g); !why.empty()) throw GemmUnsupported("gemm: " + why);

    Impl& im = *impl_;
    const CallPointers p = im.prepare(g);
    Plan& pl = im.plan(g, p);
    if (!pl.ok) throw GemmUnsupported("gemm: " + pl.why);
    im.set_pointers(pl, g, p);

    const float alpha = 1.0f, beta = g.accumulate ? 1.0f : 0.0f;
    // Device pointer mode: {alpha, beta} as prepare() wrote them on the stream.
    const float* pa = p.alpha_beta ? p.alpha_beta : &alpha;
    const float* pb = p.alpha_beta ? p.alpha_beta + 1 : &beta;
    // cuBLAS's A is our B and its B our A (see the top of this file).
    FP8SCOPE_CUBLAS_CHECK(cublasLtMatmul(im.handle, pl.desc, pa, g.b.data, pl.la, g.a.data, pl.lb, pb, g.out, pl.ld,
                                         g.out, pl.ld, &pl.algo, im.workspace, im.workspace_bytes, im.stream));
}

std::string GemmRunner::describe_plan(const GemmArgs& g) {
    check_args(g);
    if (std::string why = check(g); !why.empty()) return "unsupported: " + why;
    Plan& pl = impl_->plan(g, {g.a.scale_inv, g.b.scale_inv, g.bias});
    if (!pl.ok) return "unsupported: " + pl.why;
    return detail::describe_algo(pl.algo);
}

}  // namespace fp8scope::cuda
