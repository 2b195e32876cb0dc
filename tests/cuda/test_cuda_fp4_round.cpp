// fp4_round.h's E2M1 rounding, which the FP4 cast kernels run, against cast_rules.h's
// e2m1_code and e2m1_value over every float32 bit pattern (the in-block forms over every
// one but NaN, the unclamped one over those below 7; host only: the functions are the
// same inline code on both sides). Needs no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "cuda/cast/fp4_round.h"

namespace fp8scope {
namespace {

TEST(CudaFp4Round, EqualsE2M1CodeValueAndStochasticRoundingForEveryFloat) {
    const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::atomic<std::uint64_t> bad{0};
    std::atomic<std::uint32_t> first_bad{0xFFFFFFFFu};
    std::vector<std::thread> pool;
    const std::uint64_t total = std::uint64_t(1) << 32, per = total / threads + 1;
    for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            const std::uint64_t lo = t * per, hi = std::min(total, lo + per);
            std::uint64_t mine = 0;
            std::uint32_t mine_first = 0xFFFFFFFFu;
            for (std::uint64_t i = lo; i < hi; ++i) {
                const float y = cast::float_of(std::uint32_t(i));
                std::uint32_t c0 = 0, c1 = 0, c2 = 0;
                const std::uint8_t want = cast::e2m1_code(y, c0);
                const std::uint8_t code = cast::e2m1_code_fast(y, c1);
                const float value = cast::e2m1_round(y, c2);
                bool ok = code == want && c1 == c0 && c2 == c0 &&
                          cast::bits_of(value) == cast::bits_of(cast::e2m1_value(want));
                if (!std::isnan(y)) {  // the forms the kernels run inside a finite block
                    ok = ok && cast::e2m1_code_in_block(y) == want &&
                         cast::bits_of(cast::e2m1_round_in_block(y)) == cast::bits_of(cast::e2m1_value(want)) &&
                         cast::bits_of(cast::e2m1_round_in_block_fp(y)) == cast::bits_of(cast::e2m1_value(want));
                    ok = ok && cast::e2m1_clamped_indicator(y) == (c0 ? 1.0f : 0.0f);
                    if (std::fabs(y) < 7.0f)
                        ok = ok && cast::bits_of(cast::e2m1_round_magnitude_below7(y)) ==
                                       (cast::bits_of(cast::e2m1_value(want)) & ~cast::kSignBit);
                    // Stochastic rounding with two kinds of bits: a hash of y, and y's own
                    // low 24 bits as the top ones (near its fraction of a step).
                    const std::uint32_t h = std::uint32_t(i * 0x9E3779B97F4A7C15ull >> 32);
                    for (const std::uint32_t u : {h, std::uint32_t(i << 8)}) {
                        std::uint32_t cs = 0;
                        const std::uint8_t sr = cast::e2m1_code_sr(y, u, cs);
                        const cast::E2M1Stochastic fast = cast::e2m1_sr_in_block(y, u);
                        ok = ok && cast::e2m1_code_sr_in_block(y, u) == sr &&
                             cast::bits_of(fast.value) == cast::bits_of(cast::e2m1_value(sr));
                    }
                }
                if (!ok) {
                    ++mine;
                    mine_first = std::min(mine_first, std::uint32_t(i));
                }
            }
            bad += mine;
            std::uint32_t cur = first_bad.load();
            while (mine_first < cur && !first_bad.compare_exchange_weak(cur, mine_first)) {}
        });
    for (auto& th : pool) th.join();
    EXPECT_EQ(bad.load(), 0u) << "first differing bit pattern 0x" << std::hex << first_bad.load();
}

}  // namespace
}  // namespace fp8scope
