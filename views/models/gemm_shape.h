// A GEMM kernel's shape and FLOPs from what the trace records: the linear of the op it
// ran in (TraceMeta::linears: in and out features), which GEMM that op is (fprop, dgrad,
// wgrad) and the tokens of a step (the config's batch_size x seq_len). The trace records
// no shape per kernel and no GEMM dtypes; a kernel outside a linear's GEMM op (the head,
// evaluation) has no shape here.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>

#include "trace_records.h"

namespace fp8scope::views {

struct GemmShape {
    std::int64_t m = 0, n = 0, k = 0;  // C[m, n] = A[m, k] B[k, n]
    double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
    QString label() const;  // "4096x3072x1024 (MxNxK)"
    bool operator==(const GemmShape&) const = default;
};

// Tokens per step from the trace's config JSON; 0 when it does not say.
std::int64_t step_tokens(const trace::TraceMeta& meta);
// fprop: M = tokens, N = out, K = in; dgrad: M = tokens, N = in, K = out;
// wgrad: M = out, N = in, K = tokens. Empty when the record is not in such an op.
std::optional<GemmShape> gemm_shape(const trace::TraceMeta& meta, const trace::OpRecord& r, std::int64_t tokens);

}  // namespace fp8scope::views
