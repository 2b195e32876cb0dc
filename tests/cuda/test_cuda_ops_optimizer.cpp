// AdamW and the global gradient norm on the GPU (kernels/cuda/ops/ops.h). AdamW must equal
// the CPU backend's update (the formula of core/engine/optimizer.cpp) bit for bit over
// several steps, packed or not, with and without decay runs (down to single elements); the norm must match a
// sequential host double sum to 1e-12 and repeat bitwise.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/cpu_backend.h"
#include "test_cuda_ops.h"

namespace fp8scope {
namespace {

using testing::download_at;
using testing::GpuBuffer;
using testing::random_f32;
using testing::same_bits;
using testing::Scratch;
using testing::Stream;
using testing::upload_at;

struct AdamCase {
    std::int64_t n;
    int offset;  // elements off 16-byte alignment
    bool decay;  // decay runs, or none (no decay anywhere)
};

class CudaAdamW : public ::testing::TestWithParam<AdamCase> {};

// Gradients over seven orders of magnitude, so the rounding of every step is exercised.
std::vector<float> random_grads(std::size_t n, std::mt19937& rng) {
    auto g = random_f32(n, rng);
    std::uniform_real_distribution<float> e(-6.0f, 1.0f);
    for (float& x : g) x *= std::pow(10.0f, e(rng));
    return g;
}

TEST_P(CudaAdamW, BitwiseTheCpuBackendOverSteps) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [n, off, with_decay] = GetParam();
    const std::size_t un = std::size_t(n), uoff = std::size_t(off);
    std::mt19937 rng(81);
    auto p = random_f32(un, rng), m = random_f32(un, rng, -1e-2f, 1e-2f), v = random_f32(un, rng, 0.0f, 1e-4f);
    // Runs of random lengths 1 .. 64 with gaps of 0 .. 64 (a gap of 0 leaves two runs
    // side by side).
    std::vector<DecayRun> decay;
    for (std::int64_t i = std::int64_t(rng() % 8); with_decay && i < n;) {
        const std::int64_t end = std::min<std::int64_t>(n, i + 1 + std::int64_t(rng() % 64));
        decay.push_back({i, end});
        i = end + std::int64_t(rng() % 65);
    }

    GpuBuffer<float> d_p(un + 8), d_g(un + 8), d_m(un + 8), d_v(un + 8);
    GpuBuffer<DecayRun> d_decay(decay.size() + 1);
    upload_at(d_p, uoff, p);
    upload_at(d_m, uoff, m);
    upload_at(d_v, uoff, v);
    upload_at(d_decay, 0, decay);

    CpuBackend cpu(1);
    Stream s;
    for (int t = 1; t <= 3; ++t) {
        AdamWParams ap;
        ap.lr = 3e-4f * float(t);
        ap.beta1 = 0.9f;
        ap.beta2 = 0.95f;
        ap.eps = 1e-8f;
        ap.weight_decay = 0.1f;
        ap.bias_correction1 = static_cast<float>(1.0 - std::pow(double(ap.beta1), double(t)));
        ap.bias_correction2 = static_cast<float>(1.0 - std::pow(double(ap.beta2), double(t)));
        ap.grad_scale = t == 2 ? 0.3125f : t == 3 ? 0.7f : 1.0f;  // clipping in the update
        const auto g = random_grads(un, rng);
        cpu.adamw(p.data(), g.data(), m.data(), v.data(), decay, n, ap);

        upload_at(d_g, uoff, g);
        cuda::adamw(d_p.get() + off, d_g.get() + off, d_m.get() + off, d_v.get() + off,
                    decay.empty() ? nullptr : d_decay.get(), std::int64_t(decay.size()), n, ap, s);
        s.sync();
        EXPECT_TRUE(same_bits(download_at(d_p, uoff, un), p)) << "params, step " << t;
        EXPECT_TRUE(same_bits(download_at(d_m, uoff, un), m)) << "m, step " << t;
        EXPECT_TRUE(same_bits(download_at(d_v, uoff, un), v)) << "v, step " << t;
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaAdamW,
                         ::testing::Values(AdamCase{10007, 0, true}, AdamCase{10007, 1, true}, AdamCase{4, 0, true},
                                           AdamCase{1, 0, false}, AdamCase{100003, 0, false}));

struct NormCase {
    std::int64_t n;
    int offset;
};

class CudaGradNorm : public ::testing::TestWithParam<NormCase> {};

TEST_P(CudaGradNorm, MatchesAHostDoubleSumAndRepeatsBitwise) {
    FP8SCOPE_REQUIRE_GPU();
    const auto [n, off] = GetParam();
    std::mt19937 rng(91);
    const auto g = random_grads(std::size_t(n), rng);
    double sum = 0;
    for (float x : g) sum += double(x) * double(x);
    const double ref = std::sqrt(sum);

    GpuBuffer<float> d_g(std::size_t(n) + 8);
    upload_at(d_g, std::size_t(off), g);
    GpuBuffer<double> norm(1);
    Scratch ws(cuda::grad_norm_workspace(n));
    Stream s;
    cuda::grad_norm(norm.get(), d_g.get() + off, n, ws.ws(), s);
    s.sync();
    const double got = norm.download()[0];
    // The host's sequential double sum of n non-negative terms is itself only good to
    // (n - 1) 2^-53 relative; the square root halves that.
    EXPECT_NEAR(got, ref, (0.5 * double(n) * std::ldexp(1.0, -53) + 1e-15) * ref);
    cuda::grad_norm(norm.get(), d_g.get() + off, n, ws.ws(), s);
    s.sync();
    EXPECT_TRUE(same_bits(norm.download(), std::vector<double>{got})) << "second run";
}

// One element, one partial chunk, several chunks (aligned or not), 65 chunks.
INSTANTIATE_TEST_SUITE_P(Sizes, CudaGradNorm,
                         ::testing::Values(NormCase{1, 0}, NormCase{1000, 0}, NormCase{3 * 65536 + 123, 0},
                                           NormCase{3 * 65536 + 123, 1}, NormCase{(1 << 22) + 5, 0}));

}  // namespace
}  // namespace fp8scope
