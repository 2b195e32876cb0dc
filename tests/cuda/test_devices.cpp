// The device query behind `fp8scope-engine devices`, checked against the runtime.
#include <cuda_runtime.h>

#include "gpu_test.h"

namespace fp8scope {
namespace {

TEST(CudaDevices, MatchTheRuntime) {
    FP8SCOPE_REQUIRE_GPU();
    int count = 0;
    ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
    auto list = cuda::devices();
    ASSERT_EQ(int(list.size()), count);
    for (const auto& d : list) {
        cudaDeviceProp p{};
        ASSERT_EQ(cudaGetDeviceProperties(&p, d.index), cudaSuccess);
        EXPECT_EQ(d.name, p.name);
        EXPECT_EQ(d.major, p.major);
        EXPECT_EQ(d.memory_bytes, p.totalGlobalMem);
        EXPECT_EQ(cuda::has_fp8_tensor_cores(d), p.major * 10 + p.minor >= 89);
    }
}

}  // namespace
}  // namespace fp8scope
