// Kernel kinds from names.
#include "models/kernel_kind.h"

#include <QHash>
#include <algorithm>
#include <cctype>
#include <mutex>
#include <string>

#include "util/readable_kernel_name.h"

namespace fp8scope::views {

namespace {

bool contains_any(const std::string& lower, std::initializer_list<std::string_view> words) {
    return std::any_of(words.begin(), words.end(), [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

}  // namespace

KernelKind kernel_kind_of_name(std::string_view name) {
    std::string n(name);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n.starts_with("memcpy") || n.starts_with("memset")) return KernelKind::Copy;
    if (contains_any(n, {"nccl"})) return KernelKind::Communication;
    if (contains_any(n, {"nvjet", "gemm", "xmma", "cutlass"})) return KernelKind::Gemm;
    if (contains_any(n, {"::attn::", "flash_", "causal_softmax", "causal_probs", "attention"})) return KernelKind::Attention;
    if (contains_any(n, {"::an::", "histogram", "bit_patterns", "stats_kernel"})) return KernelKind::Capture;
    if (contains_any(n, {"adam", "sum_squares", "norm_combine", "optimizer"})) return KernelKind::Optimizer;
    if (contains_any(n, {"::qk::", "quantize", "cast_", "amax", "delayed_push", "set_scale", "zero_words",
                         "f32_to_bf16", "bf16_to_f32", "::prepare_kernel"}))
        return KernelKind::Quantize;
    return KernelKind::Other;
}

KernelKind kernel_kind(const trace::TraceMeta& meta, const trace::OpRecord& r) {
    if (!is_device(r)) return KernelKind::Host;
    if (r.op < 0 || r.op >= static_cast<int>(meta.ops.size())) return KernelKind::Other;
    return kernel_kind_of_name(meta.ops[static_cast<std::size_t>(r.op)]);
}

QString kernel_kind_name(KernelKind k) {
    switch (k) {
        case KernelKind::Host: return QStringLiteral("host");
        case KernelKind::Gemm: return QStringLiteral("GEMM");
        case KernelKind::Quantize: return QStringLiteral("quantize");
        case KernelKind::Capture: return QStringLiteral("capture");
        case KernelKind::Attention: return QStringLiteral("attention");
        case KernelKind::Optimizer: return QStringLiteral("optimizer");
        case KernelKind::Communication: return QStringLiteral("communication");
        case KernelKind::Copy: return QStringLiteral("copy/memset");
        case KernelKind::Other: break;
    }
    return QStringLiteral("other");
}

QColor kernel_kind_color(KernelKind k) {
    // GEMMs blue, quantize orange, capture red (its cost stands out), attention purple,
    // optimizer green, communication teal, copies brown, other lilac, host grey.
    static const QColor colors[kKernelKinds] = {
        QColor(0xb0, 0xb0, 0xb0), QColor(0x4e, 0x79, 0xc4), QColor(0xf2, 0xa6, 0x5a),
        QColor(0xe0, 0x50, 0x50), QColor(0x9b, 0x6b, 0xc8), QColor(0x5c, 0xb8, 0x6a),
        QColor(0x3a, 0xa8, 0xa8), QColor(0xa8, 0x7d, 0x5a), QColor(0xc8, 0xb6, 0xe2)};
    const int i = static_cast<int>(k);
    return colors[i >= 0 && i < kKernelKinds ? i : kKernelKinds - 1];
}

bool KernelSelection::passes(const trace::TraceMeta& meta, const trace::OpRecord& r) const {
    if (layer >= 0 && r.layer != layer) return false;
    if (kind == KernelFilter::All || !is_device(r)) return true;
    // KernelFilter lists the device kinds in KernelKind's order, one past Host.
    return static_cast<int>(kernel_kind(meta, r)) == static_cast<int>(kind);
}

QString short_kernel_name(const QString& name) {
    // A view names the same few dozen kernels on every redraw: folded once each.
    static std::mutex mutex;
    static QHash<QString, QString> folded;
    const std::lock_guard lock(mutex);
    auto it = folded.find(name);
    if (it == folded.end()) it = folded.insert(name, QString::fromStdString(readable_kernel_name(name.toStdString())));
    return *it;
}

}  // namespace fp8scope::views
