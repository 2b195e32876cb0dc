// The "compare with" run chooser of the views that show one run at a time (Amax, Error,
// Layers, Outliers): none or one of the trace's runs, the baseline by default. Choosing the
// selected run itself compares nothing.
#pragma once

#include <QBoxLayout>
#include <QComboBox>

#include "trace_records.h"

namespace fp8scope::views {

class CompareRunCombo : public QComboBox {
    Q_OBJECT
public:
    explicit CompareRunCombo(QWidget* parent = nullptr);
    // Refills with the trace's run names when they changed, without emitting signals; a
    // new trace (other runs) selects its baseline.
    void fill(const trace::TraceMeta& meta);
    int chosenRun() const;  // -1: none
    void chooseRun(int run);
    // The run `run` is compared with: the chosen one, -1 when none or `run` itself.
    int otherThan(int run) const;
};

// A view's toolbar row under `layout`: "compare with:" and a new chooser, the rest empty.
CompareRunCombo* add_compare_run_row(QBoxLayout* layout, QWidget* parent);

}  // namespace fp8scope::views
