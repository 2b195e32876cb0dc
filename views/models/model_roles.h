// Item roles the views' table models share: the raw number behind a formatted cell (for
// sorting, CSV export and tests) and the step a row points at (for "jump to step").
#pragma once

#include <QString>
#include <Qt>

namespace fp8scope::views {

constexpr int kValueRole = Qt::UserRole + 1;  // double, NaN when not computed
constexpr int kStepRole = Qt::UserRole + 2;   // qint64

// Numbers in tables: 4 significant digits, blank for "not computed".
inline QString format_figure(double v) {
    return v != v ? QString() : QString::number(v, 'g', 4);
}

}  // namespace fp8scope::views
