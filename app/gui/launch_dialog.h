// Launch a training run: model size preset, data, steps, the recipe or the lock-step
// comparison set, capture interval, data-parallel processes and the trace file the
// engine writes.
#pragma once

#include <QDialog>

#include "models/engine_launch.h"

class QCheckBox;
class QComboBox;
class QLineEdit;
class QSpinBox;

class LaunchDialog : public QDialog {
    Q_OBJECT
public:
    explicit LaunchDialog(const fp8scope::views::LaunchSpec& initial, QWidget* parent = nullptr);
    fp8scope::views::LaunchSpec spec() const;

private:
    QComboBox* preset_;
    QComboBox* device_;
    QLineEdit *data_, *out_;
    QSpinBox *steps_, *capture_, *procs_;
    QList<QCheckBox*> recipes_;
};
