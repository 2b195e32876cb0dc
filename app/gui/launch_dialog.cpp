// Launch dialog. One ticked recipe trains alone; several train in lock step.
#include "launch_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSpinBox>

using fp8scope::views::LaunchSpec;

LaunchDialog::LaunchDialog(const LaunchSpec& initial, QWidget* parent) : QDialog(parent) {
    setWindowTitle(tr("Launch run"));
    preset_ = new QComboBox(this);
    preset_->addItems(LaunchSpec::presets());
    preset_->setCurrentText(initial.preset);
    device_ = new QComboBox(this);
    device_->addItems(LaunchSpec::devices());
    device_->setCurrentText(initial.device);
    device_->setToolTip(tr("cuda trains on the first NVIDIA GPU: it needs an engine built with CUDA "
                           "(fp8scope-engine devices lists what it can use)"));
    data_ = new QLineEdit(initial.data, this);
    data_->setToolTip(tr("builtin (synthetic corpus), text:PATH or tokens:PATH"));
    steps_ = new QSpinBox(this);
    steps_->setRange(1, 10'000'000);
    steps_->setValue(initial.steps);
    capture_ = new QSpinBox(this);
    capture_->setRange(0, 1'000'000);
    capture_->setValue(initial.capture_every);
    capture_->setSpecialValueText(tr("off"));
    procs_ = new QSpinBox(this);
    procs_->setRange(1, LaunchSpec::kMaxProcsPerNode);
    procs_->setValue(initial.nproc_per_node);
    procs_->setToolTip(tr("data-parallel training: one process per GPU of this machine (cuda); the Health view "
                          "compares their step times"));
    auto* recipe_row = new QHBoxLayout;
    for (const QString& r : LaunchSpec::recipeNames()) {
        auto* box = new QCheckBox(r, this);
        box->setChecked(initial.recipes.contains(r));
        recipes_ << box;
        recipe_row->addWidget(box);
    }
    out_ = new QLineEdit(initial.out, this);
    auto* browse = new QPushButton(tr("..."), this);
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Trace file"), out_->text(), tr("Traces (*.h5)"));
        if (!p.isEmpty()) out_->setText(p);
    });
    auto* out_row = new QHBoxLayout;
    out_row->addWidget(out_);
    out_row->addWidget(browse);

    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    buttons->button(QDialogButtonBox::Ok)->setText(tr("Launch"));
    connect(buttons, &QDialogButtonBox::accepted, this, [this] {
        if (spec().recipes.isEmpty()) QMessageBox::warning(this, windowTitle(), tr("Tick at least one recipe."));
        else if (out_->text().trimmed().isEmpty()) QMessageBox::warning(this, windowTitle(), tr("Choose a trace file."));
        else accept();
    });
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* form = new QFormLayout(this);
    form->addRow(tr("Model size"), preset_);
    form->addRow(tr("Device"), device_);
    form->addRow(tr("Data"), data_);
    form->addRow(tr("Steps"), steps_);
    form->addRow(tr("Recipes (several: lock step)"), recipe_row);
    form->addRow(tr("Capture every N steps"), capture_);
    form->addRow(tr("Processes per node"), procs_);
    form->addRow(tr("Trace file"), out_row);
    form->addRow(buttons);
}

LaunchSpec LaunchDialog::spec() const {
    LaunchSpec s;
    s.preset = preset_->currentText();
    s.device = device_->currentText();
    s.data = data_->text().trimmed();
    s.steps = steps_->value();
    s.capture_every = capture_->value();
    s.nproc_per_node = procs_->value();
    s.recipes.clear();
    for (QCheckBox* b : recipes_)
        if (b->isChecked()) s.recipes << b->text();
    s.out = out_->text().trimmed();
    return s;
}
