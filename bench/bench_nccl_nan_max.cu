// What NCCL's own float32 max all-reduce (ncclFloat32, ncclMax) does with NaN, Inf, signed
// zeros and denormals on 2 GPUs of this machine, next to the engine's max (NCCL's int32
// max of ordered keys, comm/max_order.h), which delayed scaling's amax reduction uses.
// Each case puts two values on the two ranks, in both orders, and runs the all-reduce at
// several sizes (NCCL picks its algorithm and protocol by size: a NaN may survive one and
// not another); every element of a buffer holds the case's value. Prints, per case and
// size, the bits each rank got from each max and whether a NaN was lost. Exit status 0;
// with fewer than 2 GPUs it says so and measures nothing.
//
//   bench_nccl_nan_max [--sizes 1,1024,1048576]
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "comm/max_order.h"
#include "cuda/nccl_max_keys.h"
#include "cuda/runtime/check.h"

namespace {

using namespace fp8scope;

#define NCCL_OK(call)                                                                                    \
    do {                                                                                                 \
        ncclResult_t r_ = (call);                                                                        \
        if (r_ != ncclSuccess) {                                                                         \
            std::fprintf(stderr, "%s failed: %s\n", #call, ncclGetErrorString(r_));                      \
            std::exit(1);                                                                                \
        }                                                                                                \
    } while (0)

std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

struct Case {
    const char* name;
    float a, b;  // rank 0's value, rank 1's
};

std::string show(float f) {
    char s[48];
    std::snprintf(s, sizeof s, "%g (0x%08x)", double(f), bits(f));
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::int64_t> sizes{1, 1024, 1 << 20};
    for (int i = 1; i + 1 < argc; i += 2)
        if (std::string(argv[i]) == "--sizes") {
            sizes.clear();
            std::stringstream in(argv[i + 1]);
            for (std::string t; std::getline(in, t, ',');) sizes.push_back(std::stoll(t));
        }
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    if (gpus < 2) {
        std::printf("bench_nccl_nan_max: needs 2 GPUs, this machine has %d: nothing measured\n", gpus);
        return 0;
    }
    int version = 0;
    ncclGetVersion(&version);
    std::printf("NCCL %d.%d.%d, 2 ranks on GPUs 0 and 1 (one process)\n", version / 10000, version / 100 % 100,
                version % 100);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float denorm = from_bits(0x00000001u), big_denorm = from_bits(0x007FFFFFu);
    const std::vector<Case> cases{
        {"NaN vs 1", nan, 1.0f},
        {"1 vs NaN", 1.0f, nan},
        {"-NaN vs 1", -nan, 1.0f},
        {"NaN vs +Inf", nan, inf},
        {"+Inf vs NaN", inf, nan},
        {"NaN vs NaN", nan, nan},
        {"+Inf vs 1", inf, 1.0f},
        {"-0 vs +0", -0.0f, 0.0f},
        {"+0 vs -0", 0.0f, -0.0f},
        {"-0 vs -0", -0.0f, -0.0f},
        {"denormal 2^-149 vs 0", denorm, 0.0f},
        {"largest denormal vs 2^-149", big_denorm, denorm},
    };

    int devs[2] = {0, 1};
    ncclComm_t comms[2];
    NCCL_OK(ncclCommInitAll(comms, 2, devs));
    cudaStream_t streams[2];
    float* buf[2];
    const std::int64_t most = *std::max_element(sizes.begin(), sizes.end());
    for (int r = 0; r < 2; ++r) {
        FP8SCOPE_CUDA_CHECK(cudaSetDevice(r));
        FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&streams[r]));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&buf[r], std::size_t(most) * sizeof(float)));
    }
    // One max over both ranks: `keyed` takes the engine's path.
    auto run = [&](const Case& c, std::int64_t n, bool keyed, float out[2], bool& uniform) {
        for (int r = 0; r < 2; ++r) {
            std::vector<float> host(std::size_t(n), r == 0 ? c.a : c.b);
            FP8SCOPE_CUDA_CHECK(cudaSetDevice(r));
            FP8SCOPE_CUDA_CHECK(cudaMemcpy(buf[r], host.data(), std::size_t(n) * 4, cudaMemcpyHostToDevice));
            if (keyed) cuda::floats_to_max_keys(buf[r], n, streams[r]);
        }
        NCCL_OK(ncclGroupStart());
        for (int r = 0; r < 2; ++r)
            NCCL_OK(ncclAllReduce(buf[r], buf[r], std::size_t(n), keyed ? ncclInt32 : ncclFloat32, ncclMax, comms[r],
                                  streams[r]));
        NCCL_OK(ncclGroupEnd());
        uniform = true;
        for (int r = 0; r < 2; ++r) {
            FP8SCOPE_CUDA_CHECK(cudaSetDevice(r));
            if (keyed) cuda::max_keys_to_floats(buf[r], n, streams[r]);
            FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(streams[r]));
            std::vector<float> host(static_cast<std::size_t>(n));
            FP8SCOPE_CUDA_CHECK(cudaMemcpy(host.data(), buf[r], std::size_t(n) * 4, cudaMemcpyDeviceToHost));
            out[r] = host[0];
            for (float v : host) uniform = uniform && bits(v) == bits(host[0]);
        }
    };
    int lost = 0, lost_keyed = 0;
    std::printf("%-28s %9s  %-26s %-26s  %-26s %-26s\n", "case (rank 0 vs rank 1)", "elements", "ncclMax float: rank 0",
                "rank 1", "keyed max: rank 0", "rank 1");
    for (const Case& c : cases)
        for (std::int64_t n : sizes) {
            float nccl[2], keyed[2];
            bool nccl_uniform = false, keyed_uniform = false;
            run(c, n, false, nccl, nccl_uniform);
            run(c, n, true, keyed, keyed_uniform);
            const bool has_nan = std::isnan(c.a) || std::isnan(c.b);
            const bool nccl_lost = has_nan && !(std::isnan(nccl[0]) && std::isnan(nccl[1]));
            const bool keyed_lost = has_nan && !(std::isnan(keyed[0]) && std::isnan(keyed[1]));
            lost += nccl_lost, lost_keyed += keyed_lost;
            std::printf("%-28s %9lld  %-26s %-26s  %-26s %-26s%s%s%s\n", c.name, static_cast<long long>(n),
                        show(nccl[0]).c_str(), show(nccl[1]).c_str(), show(keyed[0]).c_str(), show(keyed[1]).c_str(),
                        nccl_lost ? "  ncclMax LOST the NaN" : "", keyed_lost ? "  keyed max LOST the NaN" : "",
                        nccl_uniform && keyed_uniform ? "" : "  (elements differ within a buffer)");
        }
    std::printf("NaN lost: ncclMax on float32 in %d of the NaN cases x sizes, the keyed max in %d\n", lost, lost_keyed);
    for (int r = 0; r < 2; ++r) {
        cudaSetDevice(r);
        cudaFree(buf[r]);
        cudaStreamDestroy(streams[r]);
        ncclCommDestroy(comms[r]);
    }
    return 0;
}
