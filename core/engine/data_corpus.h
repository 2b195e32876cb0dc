// The built-in training corpus: English-like text generated from a small probabilistic
// grammar with a fixed seed, so the engine trains on a fresh machine with no download.
// It has structure at several ranges for a byte-level model to learn: spelling of a few
// hundred words, subject-verb and number agreement, sentence templates, exact sums of
// small numbers, and names that a later sentence repeats (copying needs attention).
#pragma once

#include <cstdint>
#include <string>

namespace fp8scope {

// `bytes` characters of ASCII text (whole sentences, cut at the end), deterministic in
// `seed` on every platform.
std::string builtin_corpus(std::int64_t bytes, std::uint64_t seed);

}  // namespace fp8scope
