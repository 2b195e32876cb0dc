// The CUDA backend's FP8 chunk ops (quantize_chunks, dequantize_sum: the casts of FP8
// gradient sums) against the CPU backend's, bit for bit: headers and codes of every
// chunk, sums of several slots, over sizes that do not divide, chunks shorter than a
// vector or empty, unaligned inputs and outputs, data with subnormal codes, ties, NaN and
// +-Inf. Slots are filled with 0xCD first, so a kernel that skips a header or a code fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cuda/cuda_backend.h"
#include "gpu_test.h"
#include "support/chunk_oracle.h"

namespace fp8scope {
namespace {

using testing::chunk_test_values;

bool same(float a, float b) {
    return std::isnan(a) ? std::isnan(b) : std::memcmp(&a, &b, sizeof a) == 0;
}

class CudaChunks : public ::testing::Test {
protected:
    void SetUp() override {
        FP8SCOPE_REQUIRE_GPU();
        gpu = std::make_unique<CudaBackend>(0);
    }
    CpuBackend cpu{1};
    std::unique_ptr<CudaBackend> gpu;
};

TEST_F(CudaChunks, QuantizeChunksWritesTheCpusHeadersAndCodes) {
    for (Format f : {Format::E4M3, Format::E5M2})
        for (const ChunkLayout l : {ChunkLayout{1, 3}, ChunkLayout{3, 2}, ChunkLayout{37, 8}, ChunkLayout{4099, 3},
                                    ChunkLayout{1 << 20, 4}, ChunkLayout{1000003, 2}, ChunkLayout{0, 2}})
            for (int offset : {0, 1})  // x 16-byte aligned, or one float past it (the scalar path)
                for (bool nonfinite : {false, true}) {
                    SCOPED_TRACE(std::string(name(f)) + " n " + std::to_string(l.n) + " chunks " +
                                 std::to_string(l.chunks) + " offset " + std::to_string(offset) +
                                 (nonfinite ? " NaN/Inf" : ""));
                    const std::vector<float> x = chunk_test_values(l.n, unsigned(l.n + 13 * l.chunks), nonfinite);
                    std::vector<std::uint8_t> want(static_cast<std::size_t>(l.bytes()), 0xCD), got(want.size());
                    cpu.quantize_chunks(want.data(), x.data(), l, f);
                    testing::GpuBuffer<float> dx(x.size() + 1);
                    if (l.n)
                        FP8SCOPE_CUDA_CHECK(cudaMemcpy(dx.get() + offset, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
                    testing::GpuBuffer<std::uint8_t> slots(std::vector<std::uint8_t>(want.size(), 0xCD));
                    gpu->quantize_chunks(slots.get(), dx.get() + offset, l, f);
                    gpu->synchronize();
                    got = slots.download();
                    for (int k = 0; k < l.chunks; ++k) {
                        const std::size_t at = std::size_t(k * l.slot_bytes());
                        ASSERT_EQ(std::memcmp(got.data() + at, want.data() + at, sizeof(ChunkHeader)), 0)
                            << "header of chunk " << k;
                        for (std::int64_t i = 0; i < l.size(k); ++i)
                            ASSERT_EQ(got[at + sizeof(ChunkHeader) + std::size_t(i)],
                                      want[at + sizeof(ChunkHeader) + std::size_t(i)])
                                << "chunk " << k << " element " << i << " x " << x[std::size_t(l.begin(k) + i)];
                    }
                }
}

TEST_F(CudaChunks, DequantizeSumAddsLikeTheCpu) {
    for (Format f : {Format::E4M3, Format::E5M2})
        for (std::int64_t n : {std::int64_t(1), std::int64_t(5), std::int64_t(4099), std::int64_t(1000003)})
            for (int count : {1, 2, 3, 8})
                for (int offset : {0, 1}) {  // out aligned, or one float past it
                    SCOPED_TRACE(std::string(name(f)) + " n " + std::to_string(n) + " slots " + std::to_string(count) +
                                 " offset " + std::to_string(offset));
                    // count chunks of n, cast by the CPU: the slots a rank receives.
                    const ChunkLayout l{n * count, count};
                    const std::vector<float> x = chunk_test_values(l.n, unsigned(n * 3 + count), true);
                    std::vector<std::uint8_t> slots(static_cast<std::size_t>(l.bytes()));
                    cpu.quantize_chunks(slots.data(), x.data(), l, f);
                    std::vector<float> want(static_cast<std::size_t>(n));
                    cpu.dequantize_sum(want.data(), slots.data(), l.slot_bytes(), count, n, f);
                    testing::GpuBuffer<std::uint8_t> dslots(slots);
                    testing::GpuBuffer<float> out(std::size_t(n) + 1);
                    gpu->dequantize_sum(out.get() + offset, dslots.get(), l.slot_bytes(), count, n, f);
                    gpu->synchronize();
                    const std::vector<float> got = out.download();
                    for (std::int64_t i = 0; i < n; ++i)
                        ASSERT_TRUE(same(got[std::size_t(i + offset)], want[std::size_t(i)]))
                            << "element " << i << ": " << got[std::size_t(i + offset)] << " vs " << want[std::size_t(i)];
                }
}

}  // namespace
}  // namespace fp8scope
