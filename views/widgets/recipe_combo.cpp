// Recipe combo boxes.
#include "widgets/recipe_combo.h"

#include <QComboBox>

#include "models/recipe_error_model.h"

namespace fp8scope::views {

bool fill_recipe_combo(QComboBox* combo, const QStringList& recipes) {
    QStringList shown;
    for (int i = 0; i < combo->count(); ++i) shown << combo->itemText(i);
    if (recipes == shown) return false;
    const QSignalBlocker block(combo);
    combo->clear();
    combo->addItems(recipes);
    combo->setCurrentIndex(RecipeErrorModel::defaultReference(recipes));
    return true;
}

}  // namespace fp8scope::views
