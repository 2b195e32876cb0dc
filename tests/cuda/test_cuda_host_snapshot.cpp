// A host snapshot on the GPU sees exactly the state its start() was issued after, although
// the ops issued right after it (AdamW, scale, copy, fill) update the same arrays in place
// while the copy runs on its own stream; with device staging and without.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "gpu_test.h"

namespace fp8scope {
namespace {

void snapshot_sees_its_step(SnapshotStaging staging) {
    FP8SCOPE_REQUIRE_GPU();
    CudaBackend b;
    constexpr std::size_t n = std::size_t(24) << 20;  // 96 MB an array: the copies take milliseconds
    std::vector<float> p0(n), m0(n), v0(n), g(n);
    for (std::size_t i = 0; i < n; ++i) {
        p0[i] = float(i % 4099) * 0.25f;
        m0[i] = -float(i % 1031);
        v0[i] = float(i % 521) + 1.0f;
        g[i] = 1.0f;
    }
    auto* p = static_cast<float*>(b.allocate(n * sizeof(float)));
    auto* m = static_cast<float*>(b.allocate(n * sizeof(float)));
    auto* v = static_cast<float*>(b.allocate(n * sizeof(float)));
    auto* grads = static_cast<float*>(b.allocate(n * sizeof(float)));
    b.copy_from_host(p, p0.data(), n * sizeof(float));
    b.copy_from_host(m, m0.data(), n * sizeof(float));
    b.copy_from_host(v, v0.data(), n * sizeof(float));
    b.copy_from_host(grads, g.data(), n * sizeof(float));

    auto snap = b.make_host_snapshot(staging);
    for (int round = 0; round < 2; ++round) {  // the second reuses the buffers
        // Queued before start(): part of the snapshot (x2 is exact).
        b.scale(p, 2.0f, std::int64_t(n));
        for (float& x : p0) x *= 2.0f;
        snap->start({{p, n * sizeof(float)}, {m, n * sizeof(float)}, {v, n * sizeof(float)}});
        // Queued after: the next step's in-place updates, none of which the snapshot may see.
        AdamWParams a;
        a.lr = 0.5f;
        b.adamw(p, grads, m, v, {}, std::int64_t(n), a);
        b.scale(m, 3.0f, std::int64_t(n));
        b.copy(v, grads, n * sizeof(float));
        b.fill_zero(m, n * sizeof(float) / 2);
        snap->wait();
        // The route says which copy it was, with its size (3 x 96 MB = 0.30 GB).
        const std::string route = snap->route();
        EXPECT_NE(route.find("0.30 GB"), std::string::npos) << route;
        EXPECT_EQ(route.find("staged") != std::string::npos, staging == SnapshotStaging::Staging) << route;
        const auto* host = reinterpret_cast<const float*>(snap->host());
        EXPECT_EQ(std::memcmp(host, p0.data(), n * sizeof(float)), 0) << "params, round " << round;
        EXPECT_EQ(std::memcmp(host + n, m0.data(), n * sizeof(float)), 0) << "m, round " << round;
        EXPECT_EQ(std::memcmp(host + 2 * n, v0.data(), n * sizeof(float)), 0) << "v, round " << round;
        // The updates did run, after the copy: v is the gradients now.
        std::vector<float> v_now(n);
        b.copy_to_host(v_now.data(), v, n * sizeof(float));
        EXPECT_EQ(v_now, g);
        // The next round starts from the device's state.
        b.copy_to_host(p0.data(), p, n * sizeof(float));
        b.copy_to_host(m0.data(), m, n * sizeof(float));
        v0 = v_now;
    }
    snap.reset();
    for (void* a : {static_cast<void*>(p), static_cast<void*>(m), static_cast<void*>(v), static_cast<void*>(grads)})
        b.release(a);
}

TEST(CudaHostSnapshot, ThroughDeviceStagingSeesExactlyTheStateItWasStartedAt) {
    snapshot_sees_its_step(SnapshotStaging::Staging);
}

TEST(CudaHostSnapshot, DirectSeesExactlyTheStateItWasStartedAt) { snapshot_sees_its_step(SnapshotStaging::Direct); }

}  // namespace
}  // namespace fp8scope
