#include "kernel_launches.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace fp8scope::trace {

std::vector<std::ptrdiff_t> launching_ops(std::span<const OpRecord> records) {
    using Key = std::tuple<std::int64_t, std::int32_t, std::int32_t, std::int32_t, std::int32_t>;  // step, op, linear, layer, operand
    std::map<Key, std::vector<std::pair<std::int64_t, std::ptrdiff_t>>> hosts;  // (start, index), start ascending
    for (std::size_t i = 0; i < records.size(); ++i) {
        const OpRecord& r = records[i];
        if (r.device < 0) hosts[{r.step, r.op, r.linear, r.layer, r.operand}].emplace_back(r.start_ns, std::ptrdiff_t(i));
    }
    for (auto& [key, starts] : hosts) std::sort(starts.begin(), starts.end());
    std::vector<std::ptrdiff_t> out(records.size(), -1);
    for (std::size_t i = 0; i < records.size(); ++i) {
        const OpRecord& k = records[i];
        if (k.device < 0 || k.parent < 0) continue;
        const auto it = hosts.find({k.step, k.parent, k.linear, k.layer, k.operand});
        if (it == hosts.end()) continue;
        const auto& starts = it->second;
        auto after = std::upper_bound(starts.begin(), starts.end(), std::pair{k.start_ns, std::ptrdiff_t(records.size())});
        if (after != starts.begin()) out[i] = std::prev(after)->second;
    }
    return out;
}

}  // namespace fp8scope::trace
