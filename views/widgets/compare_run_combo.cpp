// The compare-with run chooser.
#include "widgets/compare_run_combo.h"

#include <QLabel>

#include "models/display_names.h"
#include "models/run_comparison.h"

namespace fp8scope::views {

CompareRunCombo::CompareRunCombo(QWidget* parent) : QComboBox(parent) {
    setSizeAdjustPolicy(QComboBox::AdjustToContents);
    setToolTip(tr("another run to compare the selected run with"));
    addItem(tr("none"), -1);
}

void CompareRunCombo::fill(const trace::TraceMeta& meta) {
    QStringList names{tr("none")}, shown;
    for (int r = 0; r < static_cast<int>(meta.runs.size()); ++r) names << run_label(meta, r);
    for (int i = 0; i < count(); ++i) shown << itemText(i);
    if (names == shown) return;
    const bool same_runs = shown.size() == names.size();  // renamed by a recipe switch: keep the choice
    const int chosen = chosenRun();
    const QSignalBlocker block(this);
    clear();
    for (int i = 0; i < names.size(); ++i) addItem(names[i], i - 1);
    chooseRun(same_runs ? chosen : default_compare_run(meta, -1));
}

int CompareRunCombo::chosenRun() const { return currentIndex() > 0 ? currentData().toInt() : -1; }

void CompareRunCombo::chooseRun(int run) { setCurrentIndex(run >= 0 && run + 1 < count() ? run + 1 : 0); }

int CompareRunCombo::otherThan(int run) const {
    const int other = chosenRun();
    return other == run ? -1 : other;
}

CompareRunCombo* add_compare_run_row(QBoxLayout* layout, QWidget* parent) {
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(CompareRunCombo::tr("compare with:"), parent));
    auto* combo = new CompareRunCombo(parent);
    row->addWidget(combo);
    row->addStretch();
    layout->addLayout(row);
    return combo;
}

}  // namespace fp8scope::views
