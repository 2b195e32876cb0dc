// /meta/attribution: the outcome of `fp8scope-engine attribute` beside the lock-step runs
// it trained (docs/trace-format.md), a row per group restored to high precision: the
// loss its replica reached, the share of the recipe's gap it recovered, its rank and
// whether the chosen set holds it. Added to a finished trace (the SWMR writer fixes its
// objects when it starts; the outcome is known only after training).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "record_fields.h"

namespace fp8scope::trace {

inline constexpr const char* kAttribution = "/meta/attribution";  // optional: attribute traces only

struct AttributionRecord {
    std::string group;          // "blocks.1", "blocks.1.mlp.fc2", "wgrad"
    std::string kind;           // "layer", "linear", "gemm"
    double loss = 0;            // eval loss of R with the group restored
    double recovered = 0;       // (loss_R - loss) / (loss_R - loss_baseline)
    std::int32_t rank = 0;      // 1: recovered the most
    std::int32_t chosen = 0;    // 1: in the verified set
};

template <fields::Of<AttributionRecord> S, class V>
constexpr void visit_fields(S& r, V&& v) {
    v("group", r.group, fields::MaxChars<kNameChars>{});
    v("kind", r.kind, fields::MaxChars<16>{});
    v("loss", r.loss);
    v("recovered", r.recovered);
    v("rank", r.rank);
    v("chosen", r.chosen);
}

// Adds the table to the closed trace at `path`. Throws h5::Error naming the file.
void write_attribution_table(const std::string& path, const std::vector<AttributionRecord>& rows);
// Its rows; empty when the trace has none.
std::vector<AttributionRecord> read_attribution_table(const std::string& path);

}  // namespace fp8scope::trace
