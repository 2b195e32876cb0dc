// The GPU's output error (CudaBackend::output_error) against a float64 host reference of
// the same sums, for BF16 (activations: fprop and dgrad outputs) and float32 (wgrad)
// tensors of an awkward size, and through a whole capture step of the CUDA backend.
#include <cmath>
#include <random>

#include "cuda/cuda_backend.h"
#include "engine/fp8_linear.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope {
namespace {

using testing::GpuBuffer;

struct HostSums {
    double signal = 0, error = 0, max_abs = 0;
};

HostSums host_sums(const std::vector<float>& out, const std::vector<float>& ref) {
    HostSums s;
    for (std::size_t i = 0; i < ref.size(); ++i) {
        const double d = double(out[i]) - ref[i];
        s.signal += double(ref[i]) * ref[i];
        s.error += d * d;
        s.max_abs = std::max(s.max_abs, std::abs(d));
    }
    return s;
}

void expect_sums(const OutputError& got, const HostSums& want, std::int64_t n) {
    EXPECT_EQ(got.count, n);
    EXPECT_NEAR(got.signal / want.signal, 1.0, 1e-12);
    EXPECT_NEAR(got.error / want.error, 1.0, 1e-12);
    EXPECT_EQ(got.max_abs, float(want.max_abs));  // rounding to float keeps the order
}

constexpr std::int64_t kRows = 333, kCols = 517;  // not a multiple of any block

TEST(CudaOutputError, Float32MatchesTheHostSums) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend cuda;
    std::mt19937 rng(5);
    std::normal_distribution<float> normal;
    std::vector<float> ref(std::size_t(kRows * kCols)), out(ref.size());
    for (std::size_t i = 0; i < ref.size(); ++i) {
        ref[i] = normal(rng);
        out[i] = ref[i] + 0.01f * normal(rng);
    }
    GpuBuffer<float> dref(ref), dout(out);
    const OutputError e = cuda.output_error({dout.get(), DType::F32, kRows, kCols, Device::CUDA, false},
                                            {dref.get(), DType::F32, kRows, kCols, Device::CUDA, false});
    expect_sums(e, host_sums(out, ref), kRows * kCols);
}

TEST(CudaOutputError, Bf16MatchesTheHostSumsOfTheWidenedValues) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend cuda;
    std::mt19937 rng(6);
    std::normal_distribution<float> normal;
    std::vector<std::uint16_t> ref_bits(std::size_t(kRows * kCols)), out_bits(ref_bits.size());
    std::vector<float> ref(ref_bits.size()), out(ref_bits.size());
    for (std::size_t i = 0; i < ref.size(); ++i) {
        ref_bits[i] = float_to_bf16(normal(rng) * 3.0f);
        out_bits[i] = float_to_bf16(bf16_to_float(ref_bits[i]) * (1.0f + 0.02f * normal(rng)));
        ref[i] = bf16_to_float(ref_bits[i]);
        out[i] = bf16_to_float(out_bits[i]);
    }
    GpuBuffer<std::uint16_t> dref(ref_bits), dout(out_bits);
    const OutputError e = cuda.output_error({dout.get(), DType::BF16, kRows, kCols, Device::CUDA, false},
                                            {dref.get(), DType::BF16, kRows, kCols, Device::CUDA, false});
    expect_sums(e, host_sums(out, ref), kRows * kCols);
}

// A capture step on the GPU: every GEMM reports an error that a quantized recipe makes
// nonzero and small, and the reference the sink gets is the BF16 GEMM of the unquantized
// operands (the figures match the host's sums of the two tensors it was handed).
TEST(CudaOutputError, CaptureStepHandsEachGemmAndItsReference) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend cuda;
    constexpr std::int64_t N = 128, K = 256, M = 384;
    struct Sink : CaptureSink {
        CudaBackend* b = nullptr;
        std::vector<std::pair<Gemm, OutputError>> seen;
        std::vector<HostSums> host;
        void on_operand(const OperandCapture&) override {}
        void on_op(const OpTiming&) override {}
        void on_gemm_output(const GemmOutputCapture& c) override {
            seen.emplace_back(c.gemm, c.analysis->output_error(c.output, c.reference));
            auto widen = [&](const TensorDesc& t) {
                std::vector<float> v(std::size_t(t.numel()));
                if (t.dtype == DType::F32) {
                    b->copy_to_host(v.data(), t.data, v.size() * sizeof(float));
                } else {
                    std::vector<std::uint16_t> raw(v.size());
                    b->copy_to_host(raw.data(), t.data, raw.size() * sizeof(std::uint16_t));
                    for (std::size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_float(raw[i]);
                }
                return v;
            };
            host.push_back(host_sums(widen(c.output), widen(c.reference)));
        }
    } sink;
    sink.b = &cuda;
    Fp8Linear lin(cuda, {LinearInfo{"blocks.0.mlp.fc", 0, K, M}});
    lin.set_recipe(training_recipe("current"));
    lin.set_capture(&sink, true);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    auto device = [&](std::int64_t n, DType t, float scale) {
        std::vector<float> v(static_cast<std::size_t>(n));
        for (float& x : v) x = normal(rng) * scale;
        void* p = cuda.allocate(std::size_t(n) * dtype_size(t));
        if (t == DType::F32) {
            cuda.copy_from_host(p, v.data(), v.size() * sizeof(float));
        } else {
            std::vector<std::uint16_t> bits(v.size());
            for (std::size_t i = 0; i < v.size(); ++i) bits[i] = float_to_bf16(v[i]);
            cuda.copy_from_host(p, bits.data(), bits.size() * sizeof(std::uint16_t));
        }
        return p;
    };
    void* x = device(N * K, DType::BF16, 1.0f);
    void* w = device(M * K, DType::F32, 0.05f);
    void* dy = device(N * M, DType::BF16, 1e-3f);
    void* y = device(N * M, DType::BF16, 0);
    void* dx = device(N * K, DType::BF16, 0);
    void* dw = device(M * K, DType::F32, 0);
    auto act = [](void* p) { return ActPtr{static_cast<std::byte*>(p), DType::BF16}; };
    lin.forward(0, act(x), static_cast<float*>(w), nullptr, act(y), N, nullptr, true);
    lin.backward(0, act(dy), act(x), static_cast<float*>(w), act(dx), static_cast<float*>(dw), nullptr, N, nullptr);
    cuda.synchronize();
    ASSERT_EQ(sink.seen.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        const auto& [gemm, e] = sink.seen[i];
        EXPECT_EQ(gemm, Gemm(i));
        EXPECT_NEAR(e.error / sink.host[i].error, 1.0, 1e-9) << i;
        EXPECT_GT(e.sqnr_db(), 15.0) << i;  // E4M3 per tensor: a few per cent
        EXPECT_LT(e.sqnr_db(), 45.0) << i;
    }
    for (void* p : {x, w, dy, y, dx, dw}) cuda.release(p);
}

}  // namespace
}  // namespace fp8scope
