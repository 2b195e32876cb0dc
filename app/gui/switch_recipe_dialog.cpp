// Switch-recipe dialog.
#include "switch_recipe_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>

SwitchRecipeDialog::SwitchRecipeDialog(const QStringList& runs, const QStringList& recipes, QWidget* parent)
    : QDialog(parent) {
    setWindowTitle(tr("Switch recipe"));
    run_ = new QComboBox(this);
    run_->addItem(tr("every run"), -1);
    for (int i = 0; i < runs.size(); ++i) run_->addItem(runs[i], i);
    recipe_ = new QComboBox(this);
    recipe_->addItems(recipes);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* form = new QFormLayout(this);
    form->addRow(tr("Run"), run_);
    form->addRow(tr("Recipe"), recipe_);
    form->addRow(buttons);
}

int SwitchRecipeDialog::run() const { return run_->currentData().toInt(); }
QString SwitchRecipeDialog::recipe() const { return recipe_->currentText(); }
