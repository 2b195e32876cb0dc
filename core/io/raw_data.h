// Element bytes as stored in tensor files, read into float32: the part the .npy and
// .safetensors readers share (size checks, byte order, widening in place).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "io/input_file.h"

namespace fp8scope {

enum class RawType { F16, BF16, F32, F64 };

std::uint64_t raw_itemsize(RawType t);

// Bytes that `shape` of `itemsize`-byte elements takes, or nullopt when a dimension is
// negative or the product of the non-zero dimensions times itemsize passes INT64_MAX
// (so every partial product of Tensor::numel() stays in range too).
std::optional<std::uint64_t> checked_nbytes(const std::vector<std::int64_t>& shape, std::uint64_t itemsize);

// Reads n elements of `type` at `offset` (bounds checked by the caller) as float32, in
// one read into the result where the element fits in 4 bytes.
std::vector<float> read_as_float(InputFile& file, std::uint64_t offset, std::uint64_t n, RawType type,
                                 bool big_endian);

}  // namespace fp8scope
