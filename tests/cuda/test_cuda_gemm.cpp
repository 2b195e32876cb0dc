// The cuBLASLt GEMMs (kernels/cuda/gemm/gemm.h) against a float64 host reference computed from
// the decoded FP8 values times their scale_inv, on awkward shapes: per-tensor FP8 (all
// three type pairs), blockwise FP8 (1x128 x 128x128, 128x128 x 1x128, 1x128 x 1x128) with
// scales that differ wildly from block to block, so that a wrong scale layout fails
// loudly (a negative control checks that it does), BF16 and exact F32 with transposed
// views, bias and accumulate, the plan cache, and the shape rules.
//
// Tolerance of one element: |got - ref| <= out_rel * |ref| + acc * S (+ bias rounding),
// S = sum_k |a b|. out_rel is the output's rounding (BF16 2^-8, twice its half-ulp; F32
// 2^-20); acc bounds the float32 accumulation (FP8 tensor cores keep ~14 bits inside a
// chunk before cuBLASLt promotes: 2^-8, 2^-5 with fast accumulation; BF16/F32: k 2^-23,
// twice the worst case of k roundings). The relative L2 error of the whole output is held
// to a tighter bound, which is what catches TF32 in the F32 path.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/gemm/gemm.h"
#include "fp8/format.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope {
namespace {

using cuda::GemmArgs;
using cuda::GemmInput;
using cuda::GemmRunner;
using cuda::GemmScaling;
using cuda::GemmUnsupported;
using testing::GpuBuffer;

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

// --- host operands ---------------------------------------------------------------------

// An operand (rows, k): the bytes as stored (transposed storage when asked), our scale
// grid, and the values it stands for (rows, k) in float64.
struct HostOperand {
    std::int64_t rows = 0, k = 0;
    DType dtype = DType::E4M3;
    GemmScaling scaling = GemmScaling::None;
    bool transposed = false;
    std::vector<std::uint8_t> bytes;
    std::vector<float> scale_inv;
    std::vector<double> value;
};

std::uint8_t random_finite_code(Format f, std::mt19937_64& rng) {
    for (;;) {
        const auto c = std::uint8_t(rng() & 0xFF);
        if (is_finite_code(f, c)) return c;
    }
}

// Scale_inv values over 16 binades with random mantissas: neighbouring blocks differ by
// large factors, so a grid read in the wrong order changes the result everywhere.
float random_scale(std::mt19937_64& rng) {
    std::uniform_int_distribution<int> e(-8, 8);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    return std::ldexp(mant(rng), e(rng));
}

std::int64_t scale_grid_size(GemmScaling s, std::int64_t rows, std::int64_t k) {
    switch (s) {
    case GemmScaling::PerTensor: return 1;
    case GemmScaling::Tile1x128: return rows * cdiv(k, 128);
    case GemmScaling::Block128: return cdiv(rows, 128) * cdiv(k, 128);
    case GemmScaling::None: break;
    }
    return 0;
}

double scale_of(const HostOperand& op, std::int64_t r, std::int64_t c) {
    const std::int64_t KB = cdiv(op.k, 128);
    switch (op.scaling) {
    case GemmScaling::PerTensor: return op.scale_inv[0];
    case GemmScaling::Tile1x128: return op.scale_inv[std::size_t(r * KB + c / 128)];
    case GemmScaling::Block128: return op.scale_inv[std::size_t(r / 128 * KB + c / 128)];
    case GemmScaling::None: break;
    }
    return 1.0;
}

HostOperand make_operand(std::int64_t rows, std::int64_t k, DType dtype, GemmScaling scaling, bool transposed,
                         std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    HostOperand op;
    op.rows = rows, op.k = k, op.dtype = dtype, op.scaling = scaling, op.transposed = transposed;
    const std::size_t n = std::size_t(rows * k);
    op.value.resize(n);
    op.bytes.resize(n * dtype_size(dtype));
    for (std::int64_t i = 0; i < scale_grid_size(scaling, rows, k); ++i) op.scale_inv.push_back(random_scale(rng));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < k; ++c) {
            // Where element (r, c) is stored: (r, c) of (rows, k), or (c, r) of (k, rows).
            const std::size_t at = std::size_t(transposed ? c * rows + r : r * k + c);
            double v = 0;
            if (is_fp8(dtype)) {
                const Format f = dtype == DType::E4M3 ? Format::E4M3 : Format::E5M2;
                const std::uint8_t code = random_finite_code(f, rng);
                op.bytes[at] = code;
                v = double(decode(f, code)) * scale_of(op, r, c);
            } else if (dtype == DType::BF16) {
                float x = normal(rng);
                if (x == 0.0f) x = 1.0f;
                const std::uint16_t b = float_to_bf16(x);
                std::memcpy(&op.bytes[at * 2], &b, 2);
                v = bf16_to_float(b);
            } else {  // F32 with all 24 mantissa bits in use, so TF32 would show
                float x = normal(rng);
                if (x == 0.0f) x = 1.0f;
                std::memcpy(&op.bytes[at * 4], &x, 4);
                v = x;
            }
            op.value[std::size_t(r * k + c)] = v;
        }
    }
    return op;
}

template <class T>
void upload(GpuBuffer<T>& d, const std::vector<T>& h) {
    if (!h.empty()) d.upload(h);
}

struct DeviceOperand {
    GpuBuffer<std::uint8_t> data;
    GpuBuffer<float> scale_inv;
    explicit DeviceOperand(const HostOperand& h) : data(h.bytes.size()), scale_inv(h.scale_inv.size()) {
        upload(data, h.bytes);
        upload(scale_inv, h.scale_inv);
    }
};

GemmInput input_of(const HostOperand& h, const DeviceOperand& d) {
    GemmInput in;
    in.data = d.data.get();
    in.dtype = h.dtype;
    in.scaling = h.scaling;
    in.scale_inv = h.scaling == GemmScaling::None ? nullptr : d.scale_inv.get();
    in.transposed = h.transposed;
    return in;
}

// --- reference and comparison ----------------------------------------------------------

struct Reference {
    std::vector<double> out;  // (m, n)
    std::vector<double> abs;  // S = sum_k |a b| per element
};

// out = A B^T (+ bias) (+ prior), in float64, rows spread over threads.
Reference reference(const HostOperand& a, const HostOperand& b, const std::vector<float>* bias,
                    const std::vector<double>* prior) {
    const std::int64_t m = a.rows, n = b.rows, k = a.k;
    Reference ref;
    ref.out.assign(std::size_t(m * n), 0.0);
    ref.abs.assign(std::size_t(m * n), 0.0);
    auto rows = [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t i = r0; i < r1; ++i) {
            const double* ai = &a.value[std::size_t(i * k)];
            for (std::int64_t j = 0; j < n; ++j) {
                const double* bj = &b.value[std::size_t(j * k)];
                double s = 0, sa = 0;
                for (std::int64_t c = 0; c < k; ++c) {
                    const double p = ai[c] * bj[c];
                    s += p;
                    sa += std::fabs(p);
                }
                const std::size_t at = std::size_t(i * n + j);
                if (bias) s += (*bias)[std::size_t(j)];
                if (prior) s += (*prior)[at];
                ref.out[at] = s;
                ref.abs[at] = sa;
            }
        }
    };
    const std::int64_t threads = std::clamp<std::int64_t>(std::thread::hardware_concurrency(), 1, 32);
    const std::int64_t per = cdiv(m, threads);
    std::vector<std::thread> pool;
    for (std::int64_t r = 0; r < m; r += per) pool.emplace_back(rows, r, std::min(m, r + per));
    for (auto& t : pool) t.join();
    return ref;
}

struct Tolerance {
    double out_rel = 0, acc = 0, bias_rel = 0, rel_l2 = 0;
};

struct Comparison {
    double worst = 0;   // max over elements of |err| / allowed
    double rel_l2 = 0;  // norm(got - ref) / norm(ref)
    std::string where;  // the worst element
};

Comparison compare(const std::vector<float>& got, const Reference& ref, const std::vector<float>* bias,
                   std::int64_t n, const Tolerance& tol) {
    Comparison c;
    double err2 = 0, ref2 = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double want = ref.out[i], err = std::fabs(double(got[i]) - want);
        double allowed = tol.out_rel * std::fabs(want) + tol.acc * ref.abs[i] + 1e-30;
        if (bias) allowed += tol.bias_rel * std::fabs((*bias)[i % std::size_t(n)]);
        const double ratio = std::isfinite(got[i]) ? err / allowed : HUGE_VAL;
        if (!(ratio <= c.worst)) {
            c.worst = ratio;
            c.where = "(" + std::to_string(i / std::size_t(n)) + "," + std::to_string(i % std::size_t(n)) +
                      "): got " + std::to_string(got[i]) + " want " + std::to_string(want);
        }
        err2 += std::isfinite(got[i]) ? err * err : HUGE_VAL;  // NaN/Inf: infinitely wrong
        ref2 += want * want;
    }
    c.rel_l2 = std::sqrt(err2 / std::max(ref2, 1e-300));
    return c;
}

std::vector<float> download(const GpuBuffer<std::uint8_t>& out, DType t) {
    const std::vector<std::uint8_t> raw = out.download();
    std::vector<float> v(raw.size() / dtype_size(t));
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (t == DType::BF16) {
            std::uint16_t b;
            std::memcpy(&b, &raw[i * 2], 2);
            v[i] = bf16_to_float(b);
        } else {
            std::memcpy(&v[i], &raw[i * 4], 4);
        }
    }
    return v;
}

// --- one GEMM problem end to end ----------------------------------------------------------

struct Case {
    std::int64_t m, n, k;
    DType a_type, b_type;
    GemmScaling a_scaling, b_scaling;
    DType out_type = DType::BF16;
    bool bias = false, accumulate = false, fast_accum = false;
    bool a_transposed = false, b_transposed = false;
    bool claim_gemm_ready = false;  // hand our row-major grids over as if in cuBLASLt's layout
};

std::string name(const Case& c) {
    return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) + " " +
           dtype_name(c.a_type) + "(" + cuda::gemm_scaling_name(c.a_scaling) + (c.a_transposed ? ",T" : "") + ") x " +
           dtype_name(c.b_type) + "(" + cuda::gemm_scaling_name(c.b_scaling) + (c.b_transposed ? ",T" : "") +
           ") -> " + dtype_name(c.out_type) + (c.bias ? " +bias" : "") + (c.accumulate ? " +acc" : "") +
           (c.fast_accum ? " fast" : "");
}

Tolerance tolerance_for(const Case& c) {
    Tolerance t;
    const bool bf16_out = c.out_type == DType::BF16;
    t.out_rel = bf16_out ? std::ldexp(1.0, -8) : std::ldexp(1.0, -20);
    if (is_fp8(c.a_type)) {
        t.acc = c.fast_accum ? std::ldexp(1.0, -5) : std::ldexp(1.0, -8);
        t.bias_rel = std::ldexp(1.0, -8);  // staged as BF16
        t.rel_l2 = c.fast_accum ? 5e-2 : 4e-3;  // DeepSeek-V3 saw 2% errors at k = 4096
    } else {
        t.acc = double(c.k) * std::ldexp(1.0, -23);
        t.bias_rel = bf16_out ? std::ldexp(1.0, -8) : 0.0;
        t.rel_l2 = bf16_out ? 4e-3 : 2e-5;  // TF32 would give ~5e-4
    }
    return t;
}

// Runs the case; throws GemmUnsupported when the runner refuses it.
Comparison run_case(GemmRunner& runner, const Case& c, std::uint64_t seed = 1) {
    const HostOperand a = make_operand(c.m, c.k, c.a_type, c.a_scaling, c.a_transposed, seed * 7 + 1);
    const HostOperand b = make_operand(c.n, c.k, c.b_type, c.b_scaling, c.b_transposed, seed * 7 + 2);
    std::mt19937_64 rng(seed * 7 + 3);
    std::normal_distribution<float> normal(0.0f, 4.0f);

    std::vector<float> bias;
    if (c.bias)
        for (std::int64_t j = 0; j < c.n; ++j) bias.push_back(normal(rng));
    // The prior output, exactly representable in the output type.
    std::vector<double> prior;
    GpuBuffer<std::uint8_t> out(std::size_t(c.m * c.n) * dtype_size(c.out_type));
    if (c.accumulate) {
        std::vector<std::uint8_t> raw(out.size());
        for (std::int64_t i = 0; i < c.m * c.n; ++i) {
            float x = normal(rng);
            if (c.out_type == DType::BF16) {
                const std::uint16_t h = float_to_bf16(x);
                std::memcpy(&raw[std::size_t(i) * 2], &h, 2);
                x = bf16_to_float(h);
            } else {
                std::memcpy(&raw[std::size_t(i) * 4], &x, 4);
            }
            prior.push_back(x);
        }
        out.upload(raw);
    }

    DeviceOperand da(a), db(b);
    GpuBuffer<float> dbias(bias.size());
    upload(dbias, bias);
    GemmArgs g;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.a = input_of(a, da);
    g.b = input_of(b, db);
    g.a.scale_inv_gemm_ready = g.b.scale_inv_gemm_ready = c.claim_gemm_ready;
    g.out = out.get();
    g.out_dtype = c.out_type;
    g.bias = c.bias ? dbias.get() : nullptr;
    g.accumulate = c.accumulate;
    g.fast_accum = c.fast_accum;
    runner.gemm(g);
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(runner.stream()));

    const Reference ref = reference(a, b, c.bias ? &bias : nullptr, c.accumulate ? &prior : nullptr);
    return compare(download(out, c.out_type), ref, c.bias ? &bias : nullptr, c.n, tolerance_for(c));
}

void expect_correct(GemmRunner& runner, const Case& c) {
    SCOPED_TRACE(name(c));
    const Comparison r = run_case(runner, c);
    const Tolerance t = tolerance_for(c);
    EXPECT_LE(r.worst, 1.0) << "worst element " << r.where;
    EXPECT_LE(r.rel_l2, t.rel_l2);
}

struct Shape {
    std::int64_t m, n, k;
};

// m, n not multiples of 128 (nor of 16 for some), k from one tile to many.
const std::vector<Shape> kShapes = {{16, 16, 16},   {32, 48, 128},    {200, 264, 384},
                                    {17, 40, 64},   {1000, 3072, 768}, {128, 128, 4096}};
// Blockwise needs m, n multiples of 8; k a multiple of 128 here (partial K blocks apart).
const std::vector<Shape> kBlockShapes = {{8, 8, 128},       {32, 48, 128},  {200, 264, 384}, {136, 392, 640},
                                         {1000, 3072, 768}, {128, 128, 4096}};

// --- tests ---------------------------------------------------------------------------------

TEST(CudaGemm, Fp8PerTensorMatchesReference) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    const std::pair<DType, DType> pairs[] = {
        {DType::E4M3, DType::E4M3}, {DType::E4M3, DType::E5M2}, {DType::E5M2, DType::E4M3}};
    int i = 0;
    for (const Shape& s : kShapes) {
        for (const auto& [ta, tb] : pairs) {
            Case c{s.m, s.n, s.k, ta, tb, GemmScaling::PerTensor, GemmScaling::PerTensor};
            c.out_type = (i++ % 2) ? DType::F32 : DType::BF16;
            if (s.n % 8 != 0 && c.out_type == DType::BF16) c.out_type = DType::F32;
            expect_correct(runner, c);
        }
    }
}

TEST(CudaGemm, Fp8PerTensorFastAccumulation) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    for (const Shape& s : {Shape{32, 48, 128}, Shape{200, 264, 384}, Shape{128, 128, 4096}}) {
        Case c{s.m, s.n, s.k, DType::E4M3, DType::E4M3, GemmScaling::PerTensor, GemmScaling::PerTensor};
        c.fast_accum = true;
        expect_correct(runner, c);
    }
}

TEST(CudaGemm, Fp8BlockwiseMatchesReference) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    struct Mode {
        GemmScaling a, b;
        DType ta, tb;
    };
    const Mode modes[] = {
        {GemmScaling::Tile1x128, GemmScaling::Block128, DType::E4M3, DType::E4M3},   // fprop, dgrad
        {GemmScaling::Tile1x128, GemmScaling::Tile1x128, DType::E4M3, DType::E4M3},  // wgrad
        {GemmScaling::Block128, GemmScaling::Tile1x128, DType::E4M3, DType::E4M3},
        {GemmScaling::Tile1x128, GemmScaling::Block128, DType::E5M2, DType::E4M3},
        {GemmScaling::Tile1x128, GemmScaling::Tile1x128, DType::E4M3, DType::E5M2},
    };
    int i = 0;
    for (const Shape& s : kBlockShapes) {
        for (const Mode& md : modes) {
            Case c{s.m, s.n, s.k, md.ta, md.tb, md.a, md.b};
            c.out_type = (i++ % 2) ? DType::F32 : DType::BF16;
            expect_correct(runner, c);
        }
    }
}

// A partial last K block (k % 128 != 0): cuBLASLt either computes it right or the runner
// refuses it; a wrong answer is the one outcome not allowed.
TEST(CudaGemm, Fp8BlockwisePartialKBlockIsRightOrRefused) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    for (const Shape& s : {Shape{64, 64, 208}, Shape{256, 136, 336}, Shape{128, 256, 64}}) {
        for (GemmScaling sb : {GemmScaling::Block128, GemmScaling::Tile1x128}) {
            Case c{s.m, s.n, s.k, DType::E4M3, DType::E4M3, GemmScaling::Tile1x128, sb};
            SCOPED_TRACE(name(c));
            try {
                const Comparison r = run_case(runner, c);
                EXPECT_LE(r.worst, 1.0) << "worst element " << r.where;
                EXPECT_LE(r.rel_l2, tolerance_for(c).rel_l2);
                std::printf("[ partial K ] %s: computed right\n", name(c).c_str());
            } catch (const GemmUnsupported& e) {
                std::printf("[ partial K ] %s: refused (%s)\n", name(c).c_str(), e.what());
            }
        }
    }
}

// The negative control: our row-major grids handed over as if already in cuBLASLt's
// layout must fail the comparison, or the blockwise test could not catch a layout bug.
TEST(CudaGemm, WrongScaleLayoutIsCaught) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    for (GemmScaling sb : {GemmScaling::Block128, GemmScaling::Tile1x128}) {
        // KB = 3: both grids differ from cuBLASLt's (transpose for 1x128, stride 3 vs 4).
        Case c{200, 264, 384, DType::E4M3, DType::E4M3, GemmScaling::Tile1x128, sb};
        c.claim_gemm_ready = true;
        SCOPED_TRACE(name(c));
        const Comparison r = run_case(runner, c);
        EXPECT_GT(r.worst, 1.0);
        EXPECT_GT(r.rel_l2, 0.1);
    }
}

// Grids the caller already laid out the cuBLASLt way (gemm_ready_scale_index) run as they are.
TEST(CudaGemm, GemmReadyScalesAreUsedAsGiven) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    const std::int64_t m = 136, n = 392, k = 640;
    const HostOperand a = make_operand(m, k, DType::E4M3, GemmScaling::Tile1x128, false, 11);
    const HostOperand b = make_operand(n, k, DType::E4M3, GemmScaling::Block128, false, 12);
    auto ready = [](const HostOperand& op) {
        const std::int64_t KB = cdiv(op.k, 128);
        const std::int64_t R = op.scaling == GemmScaling::Tile1x128 ? op.rows : cdiv(op.rows, 128);
        std::vector<float> g(std::size_t(cuda::gemm_ready_scale_count(op.scaling, op.rows, op.k)), 0.0f);
        for (std::int64_t r = 0; r < R; ++r)
            for (std::int64_t kb = 0; kb < KB; ++kb)
                g[std::size_t(cuda::gemm_ready_scale_index(op.scaling, op.rows, op.k, r, kb))] =
                    op.scale_inv[std::size_t(r * KB + kb)];
        return g;
    };
    DeviceOperand da(a), db(b);
    GpuBuffer<float> ra(ready(a)), rb(ready(b));
    GpuBuffer<std::uint8_t> out(std::size_t(m * n) * 2);
    GemmArgs g;
    g.m = m, g.n = n, g.k = k;
    g.a = input_of(a, da);
    g.b = input_of(b, db);
    g.a.scale_inv = ra.get();
    g.b.scale_inv = rb.get();
    g.a.scale_inv_gemm_ready = g.b.scale_inv_gemm_ready = true;
    g.out = out.get();
    runner.gemm(g);
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(runner.stream()));
    Case c{m, n, k, DType::E4M3, DType::E4M3, GemmScaling::Tile1x128, GemmScaling::Block128};
    const Comparison r = compare(download(out, DType::BF16), reference(a, b, nullptr, nullptr), nullptr, n,
                                 tolerance_for(c));
    EXPECT_LE(r.worst, 1.0) << r.where;
}

// The rearranging kernel against the index function, padding included.
TEST(CudaGemm, ScaleRearrangementMatchesTheLayout) {
    FP8SCOPE_REQUIRE_GPU();
    struct Grid {
        GemmScaling s;
        std::int64_t rows, k;
    };
    for (const Grid& gr : {Grid{GemmScaling::Tile1x128, 13, 1000}, Grid{GemmScaling::Tile1x128, 4096, 8192},
                           Grid{GemmScaling::Tile1x128, 40, 128}, Grid{GemmScaling::Block128, 300, 640},
                           Grid{GemmScaling::Block128, 4096, 16384}, Grid{GemmScaling::Block128, 100, 100}}) {
        SCOPED_TRACE(std::string(cuda::gemm_scaling_name(gr.s)) + " " + std::to_string(gr.rows) + "x" +
                     std::to_string(gr.k));
        const std::int64_t KB = cdiv(gr.k, 128), R = gr.s == GemmScaling::Tile1x128 ? gr.rows : cdiv(gr.rows, 128);
        std::vector<float> ours(std::size_t(R * KB));
        for (std::size_t i = 0; i < ours.size(); ++i) ours[i] = float(i + 1);
        std::vector<float> want(std::size_t(cuda::gemm_ready_scale_count(gr.s, gr.rows, gr.k)), 0.0f);
        for (std::int64_t r = 0; r < R; ++r)
            for (std::int64_t kb = 0; kb < KB; ++kb)
                want[std::size_t(cuda::gemm_ready_scale_index(gr.s, gr.rows, gr.k, r, kb))] =
                    ours[std::size_t(r * KB + kb)];
        GpuBuffer<float> src(ours), dst(want.size());
        FP8SCOPE_CUDA_CHECK(cudaMemset(dst.get(), 0xFF, want.size() * sizeof(float)));  // NaN: padding must be written
        cuda::to_gemm_ready_scales(dst.get(), src.get(), gr.s, gr.rows, gr.k, nullptr);
        EXPECT_EQ(dst.download(), want);
    }
}

TEST(CudaGemm, BiasAndAccumulate) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    const Shape s{200, 264, 384};
    for (DType out : {DType::BF16, DType::F32}) {
        for (int what = 1; what <= 3; ++what) {  // bias, accumulate, both
            const bool bias = what & 1, acc = what & 2;
            Case pt{s.m, s.n, s.k, DType::E4M3, DType::E4M3, GemmScaling::PerTensor, GemmScaling::PerTensor, out};
            Case bw{s.m, s.n, s.k, DType::E4M3, DType::E4M3, GemmScaling::Tile1x128, GemmScaling::Block128, out};
            Case wg{s.m, s.n, s.k, DType::E5M2, DType::E4M3, GemmScaling::Tile1x128, GemmScaling::Tile1x128, out};
            Case hp{s.m, s.n, s.k, DType::BF16, DType::BF16, GemmScaling::None, GemmScaling::None, out};
            Case fp{s.m, s.n, s.k, DType::F32, DType::F32, GemmScaling::None, GemmScaling::None, DType::F32};
            for (Case* c : {&pt, &bw, &wg, &hp, &fp}) {
                c->bias = bias, c->accumulate = acc;
                if (acc && c->out_type == DType::BF16) {  // refused: see GemmRunner::check
                    EXPECT_THROW(run_case(runner, *c), GemmUnsupported) << name(*c);
                    continue;
                }
                expect_correct(runner, *c);
            }
        }
    }
}

TEST(CudaGemm, Bf16AndF32WithTransposedViews) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    for (const Shape& s : {Shape{17, 33, 45}, Shape{16, 16, 16}, Shape{200, 264, 384}, Shape{1000, 3072, 768}}) {
        for (int t = 0; t < 4; ++t) {
            for (DType in : {DType::BF16, DType::F32}) {
                Case c{s.m, s.n, s.k, in, in, GemmScaling::None, GemmScaling::None};
                c.a_transposed = t & 1, c.b_transposed = t & 2;
                c.out_type = in == DType::F32 || (t % 2) ? DType::F32 : DType::BF16;
                expect_correct(runner, c);
            }
        }
    }
}

TEST(CudaGemm, PlansAreCachedAndReused) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    Case c{200, 264, 384, DType::E4M3, DType::E4M3, GemmScaling::Tile1x128, GemmScaling::Block128};
    const Comparison first = run_case(runner, c, 5);
    EXPECT_EQ(runner.plans(), 1u);
    EXPECT_EQ(runner.heuristic_queries(), 1u);
    const Comparison again = run_case(runner, c, 5);  // same problem, new buffers
    EXPECT_EQ(runner.plans(), 1u);
    EXPECT_EQ(runner.heuristic_queries(), 1u);
    EXPECT_LE(first.worst, 1.0);
    EXPECT_LE(again.worst, 1.0);
    if (first.worst != again.worst) std::printf("[ note ] the same GEMM twice gave different bits\n");
    c.n = 256;
    run_case(runner, c, 5);
    EXPECT_EQ(runner.plans(), 2u);
    const std::string plan = runner.describe_plan([] {
        GemmArgs g;  // describing needs no valid data: nothing runs
        g.m = g.n = g.k = 256;
        g.a.data = g.b.data = g.out = reinterpret_cast<void*>(std::uintptr_t(4096));
        return g;
    }());
    EXPECT_NE(plan.find("algo"), std::string::npos) << plan;
}

TEST(CudaGemm, UnsupportedProblemsThrowBeforeRunning) {
    FP8SCOPE_REQUIRE_GPU();
    GemmRunner runner;
    GpuBuffer<std::uint8_t> buf(1 << 20);
    GpuBuffer<float> scale(std::vector<float>(4096, 1.0f));
    GemmArgs g;
    g.m = 64, g.n = 64, g.k = 24;  // k % 16 != 0
    g.a = {buf.get(), DType::E4M3, GemmScaling::PerTensor, scale.get()};
    g.b = {buf.get(), DType::E4M3, GemmScaling::PerTensor, scale.get()};
    g.out = buf.get();
    EXPECT_THROW(runner.gemm(g), GemmUnsupported);
    g.k = 128;
    g.a.dtype = g.b.dtype = DType::E5M2;
    EXPECT_THROW(runner.gemm(g), GemmUnsupported);
    EXPECT_EQ(runner.plans(), 0u);  // refused by the rules, not by the heuristic
}

// --- host only: the rules and the layout index (no GPU needed) ----------------------------

TEST(CudaGemmRules, CheckNamesWhatCuBlasLtCannotTake) {
    auto fake = reinterpret_cast<const void*>(std::uintptr_t(1) << 20);  // 256-byte aligned, never read
    const float* s = reinterpret_cast<const float*>(fake);
    auto fp8 = [&](GemmScaling sa, GemmScaling sb) {
        GemmArgs g;
        g.m = 256, g.n = 256, g.k = 256;
        g.a = {fake, DType::E4M3, sa, s};
        g.b = {fake, DType::E4M3, sb, s};
        g.out = const_cast<void*>(fake);
        return g;
    };
    EXPECT_EQ(GemmRunner::check(fp8(GemmScaling::PerTensor, GemmScaling::PerTensor)), "");
    EXPECT_EQ(GemmRunner::check(fp8(GemmScaling::Tile1x128, GemmScaling::Block128)), "");
    EXPECT_EQ(GemmRunner::check(fp8(GemmScaling::Block128, GemmScaling::Tile1x128)), "");
    EXPECT_EQ(GemmRunner::check(fp8(GemmScaling::Tile1x128, GemmScaling::Tile1x128)), "");
    EXPECT_NE(GemmRunner::check(fp8(GemmScaling::Block128, GemmScaling::Block128)), "");
    EXPECT_NE(GemmRunner::check(fp8(GemmScaling::PerTensor, GemmScaling::Tile1x128)), "");
    GemmArgs g = fp8(GemmScaling::PerTensor, GemmScaling::PerTensor);
    g.a.dtype = g.b.dtype = DType::E5M2;
    EXPECT_NE(GemmRunner::check(g), "");
    g.a.dtype = DType::E4M3;
    EXPECT_EQ(GemmRunner::check(g), "");
    g.k = 200;
    EXPECT_NE(GemmRunner::check(g), "");  // k % 16
    g.k = 256, g.n = 12;
    EXPECT_NE(GemmRunner::check(g), "");  // BF16 output rows of 24 bytes
    g.out_dtype = DType::F32;
    EXPECT_EQ(GemmRunner::check(g), "");  // 48 bytes
    g.m = 17;
    EXPECT_EQ(GemmRunner::check(g), "");  // per-tensor takes any m
    g = fp8(GemmScaling::Tile1x128, GemmScaling::Block128);
    g.m = 20;
    EXPECT_NE(GemmRunner::check(g), "");  // blockwise m % 8
    g.m = 256, g.fast_accum = true;
    EXPECT_NE(GemmRunner::check(g), "");
    g = fp8(GemmScaling::PerTensor, GemmScaling::PerTensor);
    g.a.transposed = true;
    EXPECT_NE(GemmRunner::check(g), "");
    g.a.data = static_cast<const char*>(fake) + 8;
    g.a.transposed = false;
    EXPECT_NE(GemmRunner::check(g), "");  // 8-byte aligned FP8 operand
    g = fp8(GemmScaling::None, GemmScaling::None);
    g.a.dtype = g.b.dtype = DType::BF16;
    g.m = 17, g.n = 33, g.k = 45, g.a.transposed = true;
    EXPECT_EQ(GemmRunner::check(g), "");  // BF16 takes anything
    g.b.dtype = DType::F32;
    EXPECT_NE(GemmRunner::check(g), "");
}

TEST(CudaGemmRules, GemmReadyLayoutIndex) {
    using cuda::gemm_ready_scale_count, cuda::gemm_ready_scale_index;
    // 1x128: K-block-major, rows contiguous, rows padded to 4.
    EXPECT_EQ(gemm_ready_scale_count(GemmScaling::Tile1x128, 13, 1000), 8 * 16);
    EXPECT_EQ(gemm_ready_scale_index(GemmScaling::Tile1x128, 13, 1000, 5, 0), 5);
    EXPECT_EQ(gemm_ready_scale_index(GemmScaling::Tile1x128, 13, 1000, 5, 2), 2 * 16 + 5);
    // 128x128: row-block-major, K-blocks contiguous, padded to 4.
    EXPECT_EQ(gemm_ready_scale_count(GemmScaling::Block128, 300, 640), 3 * 8);
    EXPECT_EQ(gemm_ready_scale_index(GemmScaling::Block128, 300, 640, 2, 4), 2 * 8 + 4);
    EXPECT_EQ(gemm_ready_scale_count(GemmScaling::PerTensor, 300, 640), 1);
}

TEST(CudaGemmRules, BackendOperandsMapToInputs) {
    int dummy[4] = {};
    GemmOperand op;
    op.mode = ScalingMode::Block;
    op.block_rows = 1, op.block_cols = 128;
    op.rowwise = {dummy, DType::E4M3, 256, 512, Device::CUDA, false};
    op.rowwise_scale_inv = {dummy + 1, DType::F32, 256, 4, Device::CUDA, false};
    op.columnwise = {dummy + 2, DType::E4M3, 512, 256, Device::CUDA, false};
    op.columnwise_scale_inv = {dummy + 3, DType::F32, 512, 2, Device::CUDA, false};
    GemmInput in = cuda::gemm_input(op, Copy::Columnwise);
    EXPECT_EQ(in.data, dummy + 2);
    EXPECT_EQ(in.scale_inv, reinterpret_cast<const float*>(dummy + 3));
    EXPECT_EQ(in.scaling, GemmScaling::Tile1x128);
    op.block_rows = 128;
    EXPECT_EQ(cuda::gemm_input(op, Copy::Rowwise).scaling, GemmScaling::Block128);
    op.block_rows = 32, op.block_cols = 32;
    EXPECT_THROW(cuda::gemm_input(op, Copy::Rowwise), GemmUnsupported);
    op.mode = ScalingMode::MX;
    EXPECT_THROW(cuda::gemm_input(op, Copy::Rowwise), GemmUnsupported);
    op.mode = ScalingMode::PerTensor;
    EXPECT_EQ(cuda::gemm_input(op, Copy::Rowwise).scaling, GemmScaling::PerTensor);
    op.emulated = true;
    in = cuda::gemm_input(op, Copy::Rowwise);
    EXPECT_EQ(in.dtype, DType::F32);
    EXPECT_EQ(in.scaling, GemmScaling::None);
    op = {};
    op.rowwise = {dummy, DType::BF16, 8, 8, Device::CUDA, true};
    in = cuda::gemm_input(op, Copy::Rowwise);
    EXPECT_EQ(in.dtype, DType::BF16);
    EXPECT_TRUE(in.transposed);
    EXPECT_THROW(cuda::gemm_input(op, Copy::Columnwise), std::invalid_argument);
}

}  // namespace
}  // namespace fp8scope
