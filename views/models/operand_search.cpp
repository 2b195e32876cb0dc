// Operand search: exact labels first, then the first label holding every word typed.
#include "models/operand_search.h"

#include <algorithm>

#include "models/display_names.h"

namespace fp8scope::views {

void OperandSearch::setMeta(const trace::TraceMeta& meta) {
    refs_ = all_operands(static_cast<int>(meta.linears.size()));
    labels_.clear();
    short_labels_.clear();
    for (const OperandRef& r : refs_) {
        labels_ << operand_ref_label(meta, r);
        short_labels_ << short_operand_label(meta, r);
    }
}

std::optional<OperandRef> OperandSearch::find(const QString& text) const {
    const QString t = text.simplified();
    if (t.isEmpty()) return std::nullopt;
    for (const QString& alt : gemm_alternatives(t))
        for (int i = 0; i < labels_.size(); ++i)
            if (labels_[i].compare(alt, Qt::CaseInsensitive) == 0 || short_labels_[i].compare(alt, Qt::CaseInsensitive) == 0)
                return refs_[static_cast<std::size_t>(i)];
    const QStringList words = t.split(' ');
    for (int i = 0; i < labels_.size(); ++i) {
        const bool all = std::all_of(words.begin(), words.end(), [&](const QString& w) {
            return labels_[i].contains(w, Qt::CaseInsensitive) || short_labels_[i].contains(w, Qt::CaseInsensitive);
        });
        if (all) return refs_[static_cast<std::size_t>(i)];
    }
    return std::nullopt;
}

}  // namespace fp8scope::views
