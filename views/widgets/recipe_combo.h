// A combo box of the trace's analysis quantizer (the error view's reference, the layers
// table's what-if quantizer). Refilled only when the list changes; a new list selects the
// default, per-tensor current scaling.
#pragma once

#include <QStringList>

class QComboBox;

namespace fp8scope::views {

// True when the list changed (and the combo was refilled, without emitting signals).
bool fill_recipe_combo(QComboBox* combo, const QStringList& recipes);

}  // namespace fp8scope::views
