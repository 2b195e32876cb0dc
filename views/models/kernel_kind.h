// What a device record (kernel, copy, memset) is for, so the Kernels view can colour and
// filter kernels and show what capture costs: from the host op it was launched in
// (its parent) and, when that says nothing, its name.
#pragma once

#include <QColor>
#include <QString>

#include "trace_records.h"

namespace fp8scope::views {

enum class KernelKind { Host, Gemm, Quantize, Capture, Statistics, Communication, Other };
constexpr int kKernelKinds = 7;

// Capture wins over everything (a GEMM run by capture is capture's cost); then GEMM by
// parent (fprop, dgrad, wgrad, head) or name (gemm, nvjet, xmma, cutlass); quantize by
// parent (quantize, smooth_swiglu) or name; statistics by name (amax, histogram, stats);
// communication by name (NCCL's kernels: a data-parallel job's gradient sums); else other. Host records are Host. Unknown op or parent ids fall through to Other.
KernelKind kernel_kind(const trace::TraceMeta& meta, const trace::OpRecord& r);
QString kernel_kind_name(KernelKind k);  // "host", "GEMM", "quantize", ...
// The timeline's and the table's colour of a kind: GEMMs blue, quantize orange, capture
// red (its cost stands out), statistics green, communication teal, other lilac, host grey. Here rather than
// in plot_style because the table model, which has no plots, uses it too.
QColor kernel_kind_color(KernelKind k);

// The Kernels view's filter: a kind (or all) and a layer (or all, -1).
enum class KernelFilter { All, Gemm, Quantize, Capture, Statistics, Communication, Other };
struct KernelSelection {
    KernelFilter kind = KernelFilter::All;
    int layer = -1;
    // Host records pass any kind filter (they are the CPU context of the kernels); the
    // layer filter applies to both.
    bool passes(const trace::TraceMeta& meta, const trace::OpRecord& r) const;
};

inline bool is_device(const trace::OpRecord& r) { return r.device >= 0; }

}  // namespace fp8scope::views
