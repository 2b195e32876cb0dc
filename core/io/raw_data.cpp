// float32 and float16/bfloat16 are read straight into the float vector and widened in
// place from the back (each 2-byte source lies at or past the 4-byte slot that
// overwrites it last); float64 is read in chunks because it is larger than its result.
#include "io/raw_data.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "io/half.h"

namespace fp8scope {

namespace {

constexpr bool kNativeBig = std::endian::native == std::endian::big;

std::uint16_t load16(const unsigned char* p, bool swap) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return swap ? std::uint16_t((v >> 8) | (v << 8)) : v;
}

std::uint32_t bswap32(std::uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xFF00u) | ((v << 8) & 0xFF0000u) | (v << 24);
}

std::uint64_t bswap64(std::uint64_t v) {
    return (std::uint64_t(bswap32(std::uint32_t(v))) << 32) | bswap32(std::uint32_t(v >> 32));
}

}  // namespace

std::uint64_t raw_itemsize(RawType t) {
    switch (t) {
        case RawType::F16:
        case RawType::BF16: return 2;
        case RawType::F32: return 4;
        case RawType::F64: return 8;
    }
    return 0;
}

std::optional<std::uint64_t> checked_nbytes(const std::vector<std::int64_t>& shape, std::uint64_t itemsize) {
    std::uint64_t product = itemsize;
    bool zero = false;
    for (std::int64_t d : shape) {
        if (d < 0) return std::nullopt;
        if (d == 0) {
            zero = true;
            continue;
        }
        if (product > std::uint64_t(INT64_MAX) / std::uint64_t(d)) return std::nullopt;
        product *= std::uint64_t(d);
    }
    return zero ? 0 : product;
}

std::vector<float> read_as_float(InputFile& file, std::uint64_t offset, std::uint64_t n, RawType type,
                                 bool big_endian) {
    bool swap = big_endian != kNativeBig;
    std::vector<float> out(n);
    auto* bytes = reinterpret_cast<unsigned char*>(out.data());
    switch (type) {
        case RawType::F32:
            file.read(offset, bytes, n * 4);
            if (swap)
                for (float& f : out) f = std::bit_cast<float>(bswap32(std::bit_cast<std::uint32_t>(f)));
            break;
        case RawType::F16:
        case RawType::BF16: {
            file.read(offset, bytes, n * 2);
            float (*widen)(std::uint16_t) = type == RawType::F16 ? half_to_float : bf16_to_float;
            for (std::uint64_t i = n; i-- > 0;) {
                float f = widen(load16(bytes + 2 * i, swap));
                std::memcpy(bytes + 4 * i, &f, 4);
            }
            break;
        }
        case RawType::F64: {
            constexpr std::uint64_t kChunk = 1 << 16;
            std::vector<std::uint64_t> buf(std::min(n, kChunk));
            for (std::uint64_t done = 0; done < n;) {
                std::uint64_t m = std::min(n - done, kChunk);
                file.read(offset + done * 8, buf.data(), m * 8);
                for (std::uint64_t i = 0; i < m; ++i)
                    out[done + i] = double_to_float(std::bit_cast<double>(swap ? bswap64(buf[i]) : buf[i]));
                done += m;
            }
            break;
        }
    }
    return out;
}

}  // namespace fp8scope
