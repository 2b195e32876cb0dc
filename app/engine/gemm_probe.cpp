#include "gemm_probe.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/rank_health.h"
#include "io/half.h"

namespace fp8scope::cli {

double time_gemm(Backend& backend, int n, int reps) {
    const std::size_t elems = std::size_t(n) * std::size_t(n);
    const DType act = backend.activation_dtype();
    DeviceBuffer<std::byte> a(backend, elems * dtype_size(act)), out(backend, elems * dtype_size(act));
    DeviceBuffer<float> w(backend, elems);
    std::vector<float> host(elems);
    for (std::size_t i = 0; i < elems; ++i) host[i] = float(int(i % 251) - 125) / 128.0f;  // no zeros to skip
    backend.copy_from_host(w.data(), host.data(), elems * sizeof(float));
    if (act == DType::F32) {
        backend.copy_from_host(a.data(), host.data(), elems * sizeof(float));
    } else {  // BF16 activations (a GPU)
        std::vector<std::uint16_t> bf16(elems);
        for (std::size_t i = 0; i < elems; ++i) bf16[i] = float_to_bf16(host[i]);
        backend.copy_from_host(a.data(), bf16.data(), elems * sizeof(std::uint16_t));
    }
    const ActPtr in{a.data(), act}, o{out.data(), act};
    backend.matmul_forward(o, in, w.data(), nullptr, n, n, n);  // warm-up: libraries load, clocks rise
    backend.synchronize();
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        backend.matmul_forward(o, in, w.data(), nullptr, n, n, n);
        backend.synchronize();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return median_ms(ms);
}

}  // namespace fp8scope::cli
