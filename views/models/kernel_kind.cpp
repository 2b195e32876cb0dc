// Kernel kinds from parents and names.
#include "models/kernel_kind.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace fp8scope::views {

namespace {

const std::string* name_of(const trace::TraceMeta& meta, int id) {
    return id >= 0 && id < static_cast<int>(meta.ops.size()) ? &meta.ops[id] : nullptr;
}

bool contains_any(std::string name, std::initializer_list<std::string_view> words) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    return std::any_of(words.begin(), words.end(), [&](std::string_view w) { return name.find(w) != std::string::npos; });
}

bool one_of(const std::string* s, std::initializer_list<std::string_view> names) {
    return s && std::find(names.begin(), names.end(), std::string_view(*s)) != names.end();
}

}  // namespace

KernelKind kernel_kind(const trace::TraceMeta& meta, const trace::OpRecord& r) {
    if (!is_device(r)) return KernelKind::Host;
    const std::string* parent = name_of(meta, r.parent);
    const std::string* name = name_of(meta, r.op);
    if (one_of(parent, {"capture"})) return KernelKind::Capture;
    if (one_of(parent, {"fprop", "dgrad", "wgrad", "head"}) ||
        (name && contains_any(*name, {"gemm", "nvjet", "xmma", "cutlass"})))
        return KernelKind::Gemm;
    if (one_of(parent, {"quantize", "smooth_swiglu"}) || (name && contains_any(*name, {"quantize"})))
        return KernelKind::Quantize;
    if (name && contains_any(*name, {"amax", "histogram", "stats", "statistic"})) return KernelKind::Statistics;
    if (name && contains_any(*name, {"nccl"})) return KernelKind::Communication;
    return KernelKind::Other;
}

QString kernel_kind_name(KernelKind k) {
    switch (k) {
        case KernelKind::Host: return QStringLiteral("host");
        case KernelKind::Gemm: return QStringLiteral("GEMM");
        case KernelKind::Quantize: return QStringLiteral("quantize");
        case KernelKind::Capture: return QStringLiteral("capture");
        case KernelKind::Statistics: return QStringLiteral("statistics");
        case KernelKind::Communication: return QStringLiteral("communication");
        case KernelKind::Other: break;
    }
    return QStringLiteral("other");
}

QColor kernel_kind_color(KernelKind k) {
    static const QColor colors[kKernelKinds] = {QColor(0xb0, 0xb0, 0xb0), QColor(0x6b, 0x9b, 0xd6),
                                                QColor(0xf2, 0xa6, 0x5a), QColor(0xe0, 0x60, 0x60),
                                                QColor(0x6c, 0xc0, 0x7a), QColor(0x3a, 0xa8, 0xa8),
                                                QColor(0xc8, 0xb6, 0xe2)};
    const int i = static_cast<int>(k);
    return colors[i >= 0 && i < kKernelKinds ? i : kKernelKinds - 1];
}

bool KernelSelection::passes(const trace::TraceMeta& meta, const trace::OpRecord& r) const {
    if (layer >= 0 && r.layer != layer) return false;
    if (kind == KernelFilter::All || !is_device(r)) return true;
    // KernelFilter lists the device kinds in KernelKind's order, one past Host.
    return static_cast<int>(kernel_kind(meta, r)) == static_cast<int>(kind);
}

}  // namespace fp8scope::views
