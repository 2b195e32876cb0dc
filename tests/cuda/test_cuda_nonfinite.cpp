// The CUDA backend's scan for a training run's first NaN or Inf against the CPU's: the
// same word for the same tensors (BF16 and float32, aligned and not, the first of several,
// an earlier site's kept), and a training run whose operand is made Inf at a known step
// records the same step, linear, GEMM, operand, element and block on both backends.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "engine/trainer.h"
#include "gpu_test.h"
#include "io/half.h"
#include "support/tiny_config.h"

namespace fp8scope {
namespace {

using testing::GpuBuffer;

// The word after find_nonfinite on `backend` of n values at `host` + offset (bytes of type
// T), starting from `word`.
template <class T>
std::uint64_t find_on(Backend& backend, const std::vector<T>& host, std::int64_t offset, std::int64_t rows,
                      std::int64_t cols, DType dtype, std::uint32_t tag, std::uint64_t word) {
    const std::size_t bytes = host.size() * sizeof(T);
    if (backend.device() == Device::CPU) {
        backend.find_nonfinite(TensorDesc{const_cast<T*>(host.data()) + offset, dtype, rows, cols}, tag, &word);
        return word;
    }
    DeviceBuffer<T> x(backend, host.size());
    DeviceBuffer<std::uint64_t> w(backend, 1);
    backend.copy_from_host(x.data(), host.data(), bytes);
    backend.copy_from_host(w.data(), &word, sizeof word);
    backend.find_nonfinite(TensorDesc{x.data() + offset, dtype, rows, cols, Device::CUDA}, tag, w.data());
    backend.stage_nonfinite(w.data());
    backend.synchronize();
    return backend.staged_nonfinite();
}

TEST(CudaNonFinite, ScanGivesTheCpusWord) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend gpu;
    CpuBackend cpu(1);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-4.0f, 4.0f);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    for (std::int64_t n : {std::int64_t(1), std::int64_t(37), std::int64_t(4096), std::int64_t(3 << 20)})
        for (std::int64_t offset : {0, 1})  // 16-byte aligned, and not
            for (int bad = 0; bad < 3; ++bad) {  // none, one, several
                std::vector<float> f(std::size_t(n + offset));
                for (float& v : f) v = u(rng);
                std::vector<std::size_t> at;
                for (int k = 0; k < bad * 2; ++k) at.push_back(std::size_t(offset) + std::size_t(rng() % n));
                for (std::size_t k = 0; k < at.size(); ++k) f[at[k]] = k % 2 ? nan : -inf;
                std::vector<std::uint16_t> b(f.size());
                for (std::size_t i = 0; i < f.size(); ++i) b[i] = float_to_bf16(f[i]);
                const std::int64_t rows = n % 37 == 0 ? 37 : 1, cols = n / rows;
                for (std::uint64_t start : {kNoNonFinite, nonfinite_key(3, 9)}) {  // fresh; an earlier site's find
                    SCOPED_TRACE("n " + std::to_string(n) + " offset " + std::to_string(offset) + " bad " +
                                 std::to_string(bad) + " start " + std::to_string(start));
                    const std::uint64_t want_f = find_on(cpu, f, offset, rows, cols, DType::F32, 7, start);
                    EXPECT_EQ(find_on(gpu, f, offset, rows, cols, DType::F32, 7, start), want_f);
                    const std::uint64_t want_b = find_on(cpu, b, offset, rows, cols, DType::BF16, 7, start);
                    EXPECT_EQ(find_on(gpu, b, offset, rows, cols, DType::BF16, 7, start), want_b);
                    if (bad && start == kNoNonFinite) {
                        EXPECT_NE(want_f, kNoNonFinite);
                    }
                }
            }
}

TEST(CudaNonFinite, TrainingRecordIsTheCpus) {
    FP8SCOPE_REQUIRE_GPU();
    for (const char* recipe : {"mxfp8", "blockwise", "delayed"}) {
        SCOPED_TRACE(recipe);
        TrainConfig c = testing::tiny_config(6, recipe);
        c.rewind.enabled = false;
        for (int twice = 0; twice < 2; ++twice) c.inject.push_back({3, 3, 1, "mlp.fc2", Operand::X, true, {5}, 3e38f});
        auto record = [&](Backend& backend) {
            TrainConfig on = c;
            on.device = device_name(backend.device());
            Trainer t(on, backend);
            return t.run().first_nonfinite;
        };
        CpuBackend cpu(2);
        CudaBackend gpu;
        const std::optional<NonFiniteRecord> want = record(cpu), got = record(gpu);
        ASSERT_TRUE(want && got);
        EXPECT_EQ(got->source, want->source);
        EXPECT_EQ(got->step, want->step);
        EXPECT_EQ(got->layer, want->layer);
        EXPECT_EQ(got->linear, want->linear);
        EXPECT_EQ(got->gemm, want->gemm);
        EXPECT_EQ(got->operand, want->operand);
        EXPECT_EQ(got->row, want->row);
        EXPECT_EQ(got->col, want->col);
        EXPECT_EQ(got->block, want->block);
        EXPECT_EQ(got->block_rows, want->block_rows);
        EXPECT_EQ(got->block_cols, want->block_cols);
    }
}

}  // namespace
}  // namespace fp8scope
