// Shared by the layer-op tests (test_cuda_ops_*.cpp): random BF16 data that both sides see
// exactly (values rounded to BF16 first, the CPU op reads them widened to float32),
// a stream and a workspace that free themselves, and comparisons that name the worst
// element when they fail.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/ops/ops.h"
#include "gpu_test.h"
#include "io/half.h"

namespace fp8scope::testing {

using Bits = std::vector<std::uint16_t>;

// n values uniform in [lo, hi], rounded to BF16: `bits` for the GPU, `f` (exact) for the CPU.
struct Bf16Data {
    Bits bits;
    std::vector<float> f;
};

inline Bf16Data random_bf16(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    Bf16Data d{Bits(n), std::vector<float>(n)};
    for (std::size_t i = 0; i < n; ++i) {
        d.bits[i] = float_to_bf16(dist(rng));
        d.f[i] = bf16_to_float(d.bits[i]);
    }
    return d;
}

inline std::vector<float> random_f32(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

inline std::vector<float> widen(const Bits& b) {
    std::vector<float> f(b.size());
    for (std::size_t i = 0; i < b.size(); ++i) f[i] = bf16_to_float(b[i]);
    return f;
}

inline Bits narrow(const std::vector<float>& f) {
    Bits b(f.size());
    for (std::size_t i = 0; i < f.size(); ++i) b[i] = float_to_bf16(f[i]);
    return b;
}

inline double max_abs(const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, double(std::fabs(x)));
    return m;
}

// Every |got - ref| <= atol + rtol |ref|, with atol = scale_tol * max|ref| (the output's
// scale). On failure: how many elements miss and the worst one.
inline ::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& ref, double rtol,
                                        double scale_tol) {
    if (got.size() != ref.size())
        return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << ref.size();
    const double atol = scale_tol * max_abs(ref);
    std::size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(double(got[i]) - double(ref[i]));
        const double tol = atol + rtol * std::fabs(double(ref[i]));
        const double excess = std::isnan(err) ? 1e300 : err - tol;
        if (excess > 0) ++bad;
        if (excess > worst_excess) worst_excess = excess, worst = i;
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements out of tolerance (rtol "
                                         << rtol << ", atol " << atol << "); worst [" << worst << "]: got "
                                         << got[worst] << ", want " << ref[worst];
}

// Bitwise equality (float32 or BF16 bits); names the first difference.
template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& ref) {
    if (got.size() != ref.size())
        return ::testing::AssertionFailure() << "sizes " << got.size() << " vs " << ref.size();
    for (std::size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &ref[i], sizeof(T)) != 0) {
            std::ostringstream s;
            s << "first difference at [" << i << "]: got " << +got[i] << ", want " << +ref[i];
            return ::testing::AssertionFailure() << s.str();
        }
    return ::testing::AssertionSuccess();
}

class Stream {
public:
    Stream() { FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&s_)); }
    ~Stream() { cudaStreamDestroy(s_); }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    operator cudaStream_t() const { return s_; }
    void sync() const { FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
    cudaStream_t s_ = nullptr;
};

// Device scratch of at least `bytes` for the ops that take a Workspace.
struct Scratch {
    explicit Scratch(std::size_t bytes) : buf(bytes) {}
    GpuBuffer<unsigned char> buf;
    cuda::Workspace ws() const { return {buf.get(), buf.size()}; }
};

// Host <-> device copies of part of a buffer (for the tests of unaligned pointers).
template <class T>
void upload_at(const GpuBuffer<T>& b, std::size_t offset, const std::vector<T>& host) {
    FP8SCOPE_CUDA_CHECK(cudaMemcpy(b.get() + offset, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> download_at(const GpuBuffer<T>& b, std::size_t offset, std::size_t n) {
    std::vector<T> host(n);
    FP8SCOPE_CUDA_CHECK(cudaMemcpy(host.data(), b.get() + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
}

inline cuda::bf16* bf(const GpuBuffer<std::uint16_t>& b, std::size_t offset = 0) { return b.get() + offset; }

}  // namespace fp8scope::testing
