// A small counter-based random source for the training engine. Standard library
// distributions are implementation-defined, so runs would differ between toolchains;
// SplitMix64 plus our own integer and float mapping gives the same stream everywhere and
// lets any position be reached directly from (seed, index), which makes data positions
// trivial to checkpoint.
#pragma once

#include <cstdint>

namespace fp8scope {

// One SplitMix64 step: a bijective 64-bit mix.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

class Rng {
public:
    explicit constexpr Rng(std::uint64_t seed) : state_(seed) {}
    // A stream keyed by (seed, stream): independent draws for e.g. every batch index.
    constexpr Rng(std::uint64_t seed, std::uint64_t stream)
        : state_(splitmix64(seed ^ splitmix64(stream + 0x632BE59BD9B4E019ull))) {}

    constexpr std::uint64_t next() {
        state_ += 0x9E3779B97F4A7C15ull;
        std::uint64_t x = state_;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    }
    // Uniform in [0, n), n > 0, without modulo bias (Lemire's multiply-shift with rejection).
    std::uint64_t below(std::uint64_t n) {
        for (;;) {
            unsigned __int128 m = static_cast<unsigned __int128>(next()) * n;
            auto low = static_cast<std::uint64_t>(m);
            if (low >= (0 - n) % n) return static_cast<std::uint64_t>(m >> 64);
        }
    }
    // Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
    std::uint64_t state_;
};

}  // namespace fp8scope
