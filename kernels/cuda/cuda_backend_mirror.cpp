#include "cuda/cuda_backend_mirror.h"

#include <algorithm>
#include <utility>

namespace fp8scope::cuda {

namespace {

bool inside(const float* w, std::int64_t n, const float* base, std::int64_t size) {
    return w >= base && w + n <= base + size;
}

}  // namespace

const std::uint16_t* WeightMirror::find(const float* w, std::int64_t n) {
    for (Range& r : ranges_) {
        if (!inside(w, n, r.params, r.n)) continue;
        r.asked += n;
        return r.valid ? static_cast<const std::uint16_t*>(r.copy->data()) + (w - r.params) : nullptr;
    }
    // Not updated yet (a first step): remembered by address, so repeats add up.
    auto a = std::find_if(asks_.begin(), asks_.end(), [&](const Ask& x) { return x.w == w && x.n == n; });
    if (a == asks_.end()) asks_.push_back({w, n, n});
    else a->asked += n;
    return nullptr;
}

std::uint16_t* WeightMirror::for_update(const float* params, std::int64_t n) {
    auto it = std::find_if(ranges_.begin(), ranges_.end(), [&](const Range& r) { return r.params == params && r.n == n; });
    if (it == ranges_.end()) {
        // A new range replaces those it overlaps (a model's parameters allocated anew).
        std::erase_if(ranges_, [&](const Range& r) { return r.params < params + n && params < r.params + r.n; });
        ranges_.push_back(Range{params, n, nullptr});
        it = ranges_.end() - 1;
    }
    Range& r = *it;
    std::int64_t asked = std::exchange(r.asked, 0);
    std::erase_if(asks_, [&](const Ask& a) {
        if (!inside(a.w, a.n, params, n)) return false;
        asked += a.asked;
        return true;
    });
    r.valid = asked * 3 >= n;
    if (!r.valid) {
        r.copy.reset();  // unused copies give their memory back
        return nullptr;
    }
    if (!r.copy) r.copy = std::make_unique<CudaBackend::Scratch>(*backend_);
    return r.copy->grow_as<std::uint16_t>(std::size_t(n));
}

void WeightMirror::written(const void* p, std::size_t bytes) {
    const auto* b = static_cast<const char*>(p);
    for (Range& r : ranges_) {
        const auto* rb = reinterpret_cast<const char*>(r.params);
        if (b < rb + r.n * std::int64_t(sizeof(float)) && rb < b + bytes) r.valid = false;
    }
}

}  // namespace fp8scope::cuda
