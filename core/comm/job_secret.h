// The job secret every rank of a data-parallel job holds (FP8SCOPE_JOB_SECRET, hex, at
// least 128 bits; --nproc-per-node draws one itself) and the HMAC-SHA256 proofs built on
// it: a joining rank and rank 0 each prove they know it without sending it, over fresh
// nonces, and every later frame carries a MAC under a key of its connection alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fp8scope {

inline constexpr const char* kJobSecretVar = "FP8SCOPE_JOB_SECRET";
inline constexpr std::size_t kMacBytes = 32;  // HMAC-SHA256
inline constexpr std::size_t kNonceBytes = 32;

// The secret's bytes from its hex; throws std::invalid_argument naming the variable
// (never the value) for fewer than 32 hex digits, an odd count or a non-hex digit.
std::string parse_job_secret(std::string_view hex);
// `n` bytes from the kernel's random source; throws std::runtime_error.
std::string random_bytes(std::size_t n);
std::string to_hex(std::string_view bytes);
// The bytes of lowercase or uppercase hex; empty for anything else.
std::string from_hex(std::string_view hex);

std::string hmac_sha256(std::string_view key, std::string_view data);
// Equal in a time that does not depend on where they differ.
bool same_mac(std::string_view a, std::string_view b);

// What the joining rank (`rank_side` true) or rank 0 proves over both nonces and the
// joining rank's place, and the key of the frames on that connection afterwards.
std::string hello_proof(std::string_view secret, bool rank_side, std::string_view nonce0, std::string_view nonce_rank,
                        int world_size, int rank);
std::string link_key(std::string_view secret, std::string_view nonce0, std::string_view nonce_rank, int world_size,
                     int rank);
// The MAC of a frame: its direction ('d' from rank 0, 'u' to it), its sequence number on
// the connection and its bytes. AES-256-GMAC (GCM over no plaintext; the direction and
// sequence number are its nonce, never used twice under one key): with AES-NI several
// times faster than HMAC-SHA256, which halved the CPU ranks' gradient sums.
inline constexpr std::size_t kFrameMacBytes = 16;
std::string frame_mac(std::string_view key, char direction, std::uint64_t seq, std::string_view data);

}  // namespace fp8scope
