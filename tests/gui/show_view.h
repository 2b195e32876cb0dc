// The view tests' common ground: a view set opened on the synthetic trace's run 1 with
// linear 2's fprop x current and the cursor at 37, and one view shown offscreen at a
// fixed size (with FP8SCOPE_SCREENSHOT_DIR set, saved as PREFIX + name + .png for a look).
#pragma once

#include <QSize>
#include <memory>

#include "widgets/view_set.h"

namespace fp8scope::testing {

inline std::unique_ptr<views::ViewSet> open_view_set(views::SeriesStore& store, views::StepCursor& cursor,
                                                    views::Selection& selection) {
    auto set = std::make_unique<views::ViewSet>(&store, &cursor, &selection);
    selection.setRun(1);
    selection.setOperand({2, Gemm::Fprop, Operand::X});
    set->refreshNow();
    cursor.setStep(37);
    return set;
}

inline void close_view_set(std::unique_ptr<views::ViewSet>& set) {
    for (views::StoreView* v : set->views()) v->hide();
    set.reset();
}

template <class V>
V* show_view(views::ViewSet& set, const char* name, QSize size, const QString& prefix = {}) {
    auto* v = qobject_cast<V*>(set.view(name));
    v->resize(size);
    v->show();
    set.refreshNow();
    if (const QByteArray dir = qgetenv("FP8SCOPE_SCREENSHOT_DIR"); !dir.isEmpty())
        v->grab().save(QString("%1/%2%3.png").arg(QString(dir), prefix, name));
    return v;
}

}  // namespace fp8scope::testing
