// Summing device records per step (kernel_steps.h).
#include "kernel_steps.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace fp8scope::trace {

std::vector<KernelStepRecord> sum_kernel_steps(std::vector<OpRecord> records, bool detailed) {
    std::erase_if(records, [](const OpRecord& r) { return r.device < 0; });
    std::stable_sort(records.begin(), records.end(), [](const OpRecord& a, const OpRecord& b) {
        return std::tie(a.step, a.start_ns) < std::tie(b.step, b.start_ns);
    });
    // Records with no op take the run of the next one with an op: walk each step backwards.
    for (std::size_t end = records.size(); end > 0;) {
        std::size_t begin = end;
        while (begin > 0 && records[begin - 1].step == records[end - 1].step) --begin;
        std::int32_t next = -1, last = -1;
        for (std::size_t i = end; i-- > begin;)
            if (records[i].parent >= 0) {
                if (last < 0) last = records[i].run;
                next = records[i].run;
            } else if (next >= 0) {
                records[i].run = next;
            }
        // After the step's last record with an op: that record's run (none at all: as tagged).
        for (std::size_t i = end; i-- > begin && records[i].parent < 0;)
            if (last >= 0) records[i].run = last;
        end = begin;
    }
    using Key = std::tuple<std::int64_t, std::int32_t, std::int32_t, std::int32_t, std::int32_t>;
    std::map<Key, KernelStepRecord> sums;
    for (const OpRecord& r : records) {
        const std::int64_t ns = std::max<std::int64_t>(r.end_ns - r.start_ns, 0);
        auto [it, fresh] = sums.try_emplace(Key{r.step, r.run, r.op, r.parent, static_cast<std::int32_t>(r.kind)});
        KernelStepRecord& k = it->second;
        if (fresh) {
            k = {r.run, r.step, r.op, r.parent, r.kind, detailed ? 1 : 0, 0, 0, ns, ns, 0};
        }
        ++k.count;
        k.total_ns += ns;
        k.min_ns = std::min(k.min_ns, ns);
        k.max_ns = std::max(k.max_ns, ns);
        k.bytes += r.bytes;
    }
    std::vector<KernelStepRecord> out;
    out.reserve(sums.size());
    for (auto& [key, k] : sums) out.push_back(k);
    return out;
}

}  // namespace fp8scope::trace
