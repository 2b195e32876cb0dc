// Operand search: exact labels first, then a unique substring.
#include "models/operand_search.h"

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
    for (int i = 0; i < labels_.size(); ++i)
        if (labels_[i].compare(t, Qt::CaseInsensitive) == 0 || short_labels_[i].compare(t, Qt::CaseInsensitive) == 0)
            return refs_[static_cast<std::size_t>(i)];
    std::optional<OperandRef> only;
    for (int i = 0; i < labels_.size(); ++i) {
        if (!labels_[i].contains(t, Qt::CaseInsensitive)) continue;
        if (only) return std::nullopt;  // ambiguous
        only = refs_[static_cast<std::size_t>(i)];
    }
    return only;
}

}  // namespace fp8scope::views
