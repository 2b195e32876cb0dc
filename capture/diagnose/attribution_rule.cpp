// The outcome of `fp8scope-engine attribute` (/meta/attribution) as a finding: the groups
// whose high precision the replicas showed to recover the recipe's loss gap, with the
// override that keeps them, so the measured answer stands beside the inferred ones.
#include <algorithm>

#include "attribution_table.h"
#include "diagnose_rules.h"
#include "rules.h"

namespace fp8scope::diagnose {

void attribution(const Context& c, std::vector<Finding>& out) {
    std::vector<trace::AttributionRecord> rows = trace::read_attribution_table(c.reader.path());
    if (rows.empty()) return;
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    Finding f;
    f.kind = "attribution";
    f.score = rules::kAttributionScore;
    f.run = c.meta.runs.size() > 1 ? 1 : -1;  // the replicas: baseline, the recipe, then one per group
    std::string chosen, patterns;
    double recovered_best = rows.front().recovered;
    for (const auto& r : rows) {
        f.figures.push_back({"recovered_" + r.group, r.recovered});
        if (!r.chosen) continue;
        chosen += (chosen.empty() ? "" : ", ") + r.group;
        // A layer's group is its block; keep everything in it.
        const std::string pattern = r.kind == "layer" ? r.group + ".*" : r.group;
        patterns += (patterns.empty() ? "" : ",") + pattern;
    }
    f.summary = strprintf("attribute: the group restored to high precision that recovers most of the gap is %s (%.0f%%)",
                    rows.front().group.c_str(), 100.0 * recovered_best);
    f.context.push_back(strprintf("%zu groups tried by replicas from a checkpoint (loss recovered: %.0f%% .. %.0f%%)",
                            rows.size(), 100.0 * rows.back().recovered, 100.0 * recovered_best));
    if (!chosen.empty()) {
        Fix fix;
        fix.override = patterns;
        fix.summary = "keep " + chosen + " in high precision: the smallest set whose replica met the target";
        for (const auto& r : rows)
            if (r.chosen) fix.evidence.push_back({"recovered_" + r.group, r.recovered});
        f.fix = fix;
    }
    out.push_back(std::move(f));
}

}  // namespace fp8scope::diagnose
