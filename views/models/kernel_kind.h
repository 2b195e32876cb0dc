// What a device record (kernel, copy, memset) is, from its name alone: the Kernels view
// colours, filters and sums kernels by it. The host op a kernel was launched in says
// little (an fprop launches casts, bias adds and memsets beside its GEMM), so the name
// decides; capture and eval, which are purposes rather than kinds of kernel, are the
// step categories of kernel_breakdown.h.
#pragma once

#include <QColor>
#include <QString>
#include <string_view>

#include "trace_records.h"

namespace fp8scope::views {

enum class KernelKind { Host, Gemm, Quantize, Capture, Attention, Optimizer, Communication, Copy, Other };
constexpr int kKernelKinds = 9;

// By name, case-insensitive, first match wins:
//   copy:          "memcpy ...", "memset" (the tracer's names for copies and memsets)
//   communication: NCCL's kernels (nccl...)
//   GEMM:          cuBLASLt's nvjet_*, *gemm*, xmma, cutlass (the GEMM's math alone, so
//                  that its TFLOP/s are the kernel's)
//   attention:     the flash kernels (attn::, flash_*), causal softmax/probs
//   capture:       the analysis kernels (an::, stats, tiles, histograms, bit patterns)
//   optimizer:     adamw, the gradient norm (sum_squares, norm_combine)
//   quantize:      casts and scaling (qk::, quantize, dequantize, cast_*, *amax*,
//                  delayed_push, set_scale, zero_words, f32/bf16 conversions, and
//                  gemm/scales.cu's prepare_kernel: scale grids and bias in cuBLASLt's form)
//   other:         everything else (norms, embedding, elementwise, loss, bias sums)
KernelKind kernel_kind_of_name(std::string_view name);
// Host records are Host; device records by the name of their op id (Other when unknown).
KernelKind kernel_kind(const trace::TraceMeta& meta, const trace::OpRecord& r);
QString kernel_kind_name(KernelKind k);  // "host", "GEMM", "quantize", ...
// The timeline's and the table's colour of a kind. Here rather than in plot_style
// because the table model, which has no plots, uses it too.
QColor kernel_kind_color(KernelKind k);

// The Kernels view's filter: a kind (or all) and a layer (or all, -1).
enum class KernelFilter { All, Gemm, Quantize, Capture, Attention, Optimizer, Communication, Copy, Other };
struct KernelSelection {
    KernelFilter kind = KernelFilter::All;
    int layer = -1;
    // Host records pass any kind filter (they are the CPU context of the kernels); the
    // layer filter applies to both.
    bool passes(const trace::TraceMeta& meta, const trace::OpRecord& r) const;
};

inline bool is_device(const trace::OpRecord& r) { return r.device >= 0; }

// A kernel name as the table and timeline show it: library GEMM codes and C++ template
// names folded for reading (util/readable_kernel_name.h); the full name goes in the
// tooltip and the exports.
QString short_kernel_name(const QString& name);

}  // namespace fp8scope::views
