#include "cuda/cuda_backend_mirror.h"

#include <algorithm>
#include <utility>

namespace fp8scope::cuda {

namespace {

bool inside(const float* w, std::int64_t n, const float* base, std::int64_t size) {
    return w >= base && w + n <= base + size;
}

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
    const auto* x = static_cast<const char*>(a);
    const auto* y = static_cast<const char*>(b);
    return x < y + b_bytes && y < x + a_bytes;
}

std::size_t bytes_of(std::int64_t n) { return std::size_t(n) * sizeof(float); }

}  // namespace

const std::uint16_t* WeightMirror::find(const float* w, std::int64_t n) {
    std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
    auto it = std::find_if(ranges_.begin(), ranges_.end(), [&](const Range& r) { return r.params == params && r.n == n; });
    if (it == ranges_.end()) {
        // A new range replaces those it overlaps (a model's parameters allocated anew).
        std::erase_if(ranges_, [&](const Range& r) { return overlap(r.params, bytes_of(r.n), params, bytes_of(n)); });
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
    std::lock_guard lock(mu_);
    for (Range& r : ranges_)
        if (overlap(r.params, bytes_of(r.n), p, bytes)) r.valid = false;
}

}  // namespace fp8scope::cuda
