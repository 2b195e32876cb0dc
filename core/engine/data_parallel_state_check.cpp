#include "engine/data_parallel_state_check.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "comm/rendezvous.h"
#include "engine/model.h"

namespace fp8scope {

std::uint64_t fnv1a64(const void* data, std::size_t bytes, std::uint64_t hash) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < bytes; ++i) hash = (hash ^ p[i]) * 0x100000001b3ull;
    return hash;
}

std::vector<ScalingDigest> scaling_digests(const std::vector<const Model*>& models) {
    std::vector<ScalingDigest> out;
    for (std::size_t run = 0; run < models.size(); ++run) {
        const Model& m = *models[run];
        const std::string prefix = models.size() > 1 ? "run " + std::to_string(run) + ": " : "";
        for (int l = 0; l < int(m.linears().size()); ++l)
            for (Operand o : {Operand::X, Operand::W, Operand::DY}) {
                const std::optional<DelayedState> s = m.delayed_state(l, o);
                if (!s) continue;
                std::uint64_t h = kFnvOffset;
                for (float a : s->history()) h = fnv1a64(&a, sizeof a, h);
                const float scale = s->scale();
                h = fnv1a64(&scale, sizeof scale, h);
                out.push_back({prefix + m.linears()[std::size_t(l)].name + " " + std::string(operand_name(o)), h});
            }
    }
    return out;
}

std::uint64_t combined_digest(const std::vector<ScalingDigest>& digests) {
    if (digests.empty()) return 0;  // no delayed scaling: as a share that says nothing
    std::uint64_t h = kFnvOffset;
    for (const ScalingDigest& d : digests) h = fnv1a64(&d.digest, sizeof d.digest, h);
    return h;
}

std::string encode_digests(const std::vector<ScalingDigest>& digests) {
    std::string out;
    for (const ScalingDigest& d : digests) out.append(reinterpret_cast<const char*>(&d.digest), sizeof d.digest);
    return out;
}

std::vector<std::uint64_t> decode_digests(const std::string& blob) {
    std::vector<std::uint64_t> out(blob.size() / sizeof(std::uint64_t));
    std::memcpy(out.data(), blob.data(), out.size() * sizeof(std::uint64_t));
    return out;
}

std::vector<ScalingMismatch> find_mismatches(const std::vector<std::vector<std::uint64_t>>& per_rank,
                                             const std::vector<ScalingDigest>& mine) {
    std::vector<ScalingMismatch> out;
    for (std::size_t t = 0; t < mine.size(); ++t) {
        // Per digest: the ranks that hold it (a rank without this tensor holds none).
        std::map<std::uint64_t, std::vector<int>> holders;
        std::vector<int> missing;
        for (std::size_t r = 0; r < per_rank.size(); ++r) {
            if (t < per_rank[r].size()) holders[per_rank[r][t]].push_back(int(r));
            else missing.push_back(int(r));
        }
        if (holders.size() == 1 && missing.empty()) continue;
        const std::vector<int>* common = nullptr;
        for (const auto& [digest, ranks] : holders)
            if (!common || ranks.size() > common->size() ||
                (ranks.size() == common->size() && ranks.front() < common->front()))
                common = &ranks;
        ScalingMismatch m{mine[t].tensor, {}, *common};
        for (std::size_t r = 0; r < per_rank.size(); ++r)
            if (!std::binary_search(common->begin(), common->end(), int(r))) m.ranks.push_back(int(r));
        out.push_back(std::move(m));
    }
    return out;
}

std::vector<std::string> ScalingStateCheck::report(const std::vector<ScalingMismatch>& now) {
    std::set<std::string> differing;
    std::vector<std::string> out;
    std::size_t more = 0;
    for (const ScalingMismatch& m : now) {
        differing.insert(m.tensor);
        if (differing_.count(m.tensor)) continue;
        if (out.size() == kMaxReported) {
            ++more;
            continue;
        }
        out.push_back("delayed scaling state of " + m.tensor + " differs on rank(s) " + rank_list(m.ranks) +
                      " from rank(s) " + rank_list(m.agreeing) + " (amax history or scale not bitwise equal)");
    }
    if (more) out.push_back("delayed scaling state of " + std::to_string(more) + " more tensor(s) differs across ranks");
    differing_ = std::move(differing);
    return out;
}

}  // namespace fp8scope
