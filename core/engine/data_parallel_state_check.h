// The ranks of a data-parallel job must hold bitwise the same delayed-scaling state after
// every step: the same amax history and scale for every linear and operand, or their
// casts differ and the replicas drift apart unnoticed. Each step every rank hashes that
// state (FNV-1a, 64 bits, per linear and operand: the history oldest first, then the
// scale, as float32 bytes) and sends the hash of all of them with its step record; only
// when these differ do the ranks exchange the per-tensor digests, to name the tensors
// and the ranks that differ. A tensor is reported when it starts to differ, not every
// step it still does (a changed history entry stays for the history's length).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace fp8scope {

class Model;

constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t hash = kFnvOffset);

// The digest of one delayed-scaling state, named "blocks.0.mlp.fc2 dy" ("run 1: ..." when
// a job trains several runs in lock step).
struct ScalingDigest {
    std::string tensor;
    std::uint64_t digest = 0;
};
// Every linear and operand the current recipe of each model scales with delayed scaling
// (the rowwise copy's state), in run, linear and operand order.
std::vector<ScalingDigest> scaling_digests(const std::vector<const Model*>& models);
// The digest of all of them: the hash of the per-tensor digests in order; 0 for none.
std::uint64_t combined_digest(const std::vector<ScalingDigest>& digests);

// Per-tensor digests as the ranks exchange them (8 bytes each, in order) and back; the
// names are the receiving rank's own.
std::string encode_digests(const std::vector<ScalingDigest>& digests);
std::vector<std::uint64_t> decode_digests(const std::string& blob);

struct ScalingMismatch {
    std::string tensor;
    std::vector<int> ranks;     // the ranks whose state differs from the most common one
    std::vector<int> agreeing;  // the ranks that hold the most common one
};
// The tensors whose digest is not the same on every rank, given every rank's digests in
// rank order and this rank's names. The most common digest is the reference (on a tie,
// the one of the lowest rank among the tied). A rank that sent another number of digests
// differs in every tensor past the shorter list.
std::vector<ScalingMismatch> find_mismatches(const std::vector<std::vector<std::uint64_t>>& per_rank,
                                             const std::vector<ScalingDigest>& mine);

// Remembers which tensors differed at the last check, so each is reported once when it
// starts to differ.
class ScalingStateCheck {
public:
    // The event details of the tensors that differ now and did not at the last check
    // (at most kMaxReported, then one that counts the rest); clears everything when the
    // ranks agree.
    std::vector<std::string> report(const std::vector<ScalingMismatch>& now);
    static constexpr std::size_t kMaxReported = 8;

private:
    std::set<std::string> differing_;
};

}  // namespace fp8scope
