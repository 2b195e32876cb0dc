// The step toolbar shared by all views: run and operand choosers, the step slider and
// box, follow / pause / play, and the operand search box.
#pragma once

#include <QToolBar>

#include "models/operand_search.h"
#include "models/selection.h"
#include "models/series_store.h"
#include "models/step_cursor.h"

class QComboBox;
class QLineEdit;
class QStringListModel;
class QSlider;
class QSpinBox;
class QAction;

class CursorBar : public QToolBar {
    Q_OBJECT
public:
    CursorBar(const fp8scope::views::SeriesStore* store, fp8scope::views::StepCursor* cursor,
              fp8scope::views::Selection* selection, QWidget* parent = nullptr);
    // Re-reads run and operand names (after a new trace) and the step range.
    void refresh();

private:
    void showCursor();
    void search(const QString& text);
    const fp8scope::views::SeriesStore* store_;
    fp8scope::views::StepCursor* cursor_;
    fp8scope::views::Selection* selection_;
    QComboBox *run_, *operand_;
    QSlider* slider_;
    QSpinBox* step_;
    QLineEdit* search_box_;
    QStringListModel* search_labels_;
    fp8scope::views::OperandSearch search_;
    QAction *follow_, *pause_, *play_;
    std::uint64_t names_generation_ = ~0ull;
};
