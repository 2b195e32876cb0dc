// Operand search (the toolbar's search box): the labels of every operand of a trace for a
// completer, and the operand that a typed text names.
#pragma once

#include <QStringList>
#include <optional>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

class OperandSearch {
public:
    void setMeta(const trace::TraceMeta& meta);
    // "blocks.0.mlp.fc1 fprop x", in slot order.
    const QStringList& labels() const { return labels_; }
    // The operand whose long or short label ("L0 fc1 fprop x", also "L0 qkv dgrad+wgrad dy"
    // as the Layers table writes it) is `text` (case does not matter), else the first in
    // slot order (the completer's first) whose labels hold every word of it; none when no
    // operand matches.
    std::optional<OperandRef> find(const QString& text) const;

private:
    std::vector<OperandRef> refs_;
    QStringList labels_, short_labels_;
};

}  // namespace fp8scope::views
