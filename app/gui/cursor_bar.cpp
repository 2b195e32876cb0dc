// Step toolbar.
#include "cursor_bar.h"

#include <QAction>
#include <QComboBox>
#include <QCompleter>
#include <QLineEdit>
#include <QStringListModel>
#include <QLabel>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>

#include "models/display_names.h"

using namespace fp8scope::views;

CursorBar::CursorBar(const SeriesStore* store, StepCursor* cursor, Selection* selection, QWidget* parent)
    : QToolBar(tr("Step"), parent), store_(store), cursor_(cursor), selection_(selection) {
    setObjectName("step_toolbar");
    addWidget(new QLabel(tr(" run ")));
    run_ = new QComboBox(this);
    addWidget(run_);
    addWidget(new QLabel(tr(" operand ")));
    operand_ = new QComboBox(this);
    operand_->setMinimumContentsLength(24);
    addWidget(operand_);
    addSeparator();
    follow_ = addAction(tr("Follow"), cursor, &StepCursor::follow);
    follow_->setToolTip(tr("follow the newest step"));
    pause_ = addAction(tr("Pause"), cursor, &StepCursor::pause);
    play_ = addAction(tr("Play"), cursor, [cursor] { cursor->play(std::max<qint64>(1, (cursor->last() - cursor->first()) / 400)); });
    for (QAction* a : {follow_, pause_, play_}) a->setCheckable(true);
    addWidget(new QLabel(tr(" step ")));
    slider_ = new QSlider(Qt::Horizontal, this);
    slider_->setMinimumWidth(260);
    addWidget(slider_);
    step_ = new QSpinBox(this);
    step_->setMaximum(0);
    step_->setMinimumWidth(90);
    addWidget(step_);

    addSeparator();
    search_box_ = new QLineEdit(this);
    search_box_->setPlaceholderText(tr("find operand (e.g. fc1 wgrad dy)"));
    search_box_->setClearButtonEnabled(true);
    search_box_->setMaximumWidth(260);
    search_labels_ = new QStringListModel(this);
    auto* completer = new QCompleter(search_labels_, this);
    completer->setCaseSensitivity(Qt::CaseInsensitive);
    completer->setFilterMode(Qt::MatchContains);
    search_box_->setCompleter(completer);
    addWidget(search_box_);
    connect(completer, qOverload<const QString&>(&QCompleter::activated), this, &CursorBar::search);
    connect(search_box_, &QLineEdit::returnPressed, this, [this] { search(search_box_->text()); });

    connect(run_, &QComboBox::currentIndexChanged, selection, [selection](int i) { if (i >= 0) selection->setRun(i); });
    connect(operand_, &QComboBox::currentIndexChanged, selection, [this](int i) {
        if (i >= 0) selection_->setOperand(all_operands(operand_->count() / fp8scope::trace::kOperandsPerLinear)[i]);
    });
    connect(slider_, &QSlider::sliderMoved, cursor, [cursor](int v) { cursor->setStep(v); });
    connect(step_, &QSpinBox::editingFinished, cursor, [this] { cursor_->setStep(step_->value()); });
    connect(cursor, &StepCursor::stepChanged, this, &CursorBar::showCursor);
    connect(cursor, &StepCursor::rangeChanged, this, &CursorBar::showCursor);
    connect(cursor, &StepCursor::modeChanged, this, &CursorBar::showCursor);
    connect(selection, &Selection::changed, this, [this] {
        const QSignalBlocker b1(run_), b2(operand_);
        run_->setCurrentIndex(selection_->run());
        operand_->setCurrentIndex(selection_->operand().slot());
    });
    showCursor();
}

void CursorBar::refresh() {
    if (store_->generation() == names_generation_) {
        // Within one trace a recipe switch renames its run.
        store_->read([&](const TraceData& d) {
            for (int r = 0; r < run_->count() && r < static_cast<int>(d.meta.runs.size()); ++r)
                if (const QString name = run_label(d.meta, r); run_->itemText(r) != name) run_->setItemText(r, name);
        });
        return;
    }
    names_generation_ = store_->generation();
    const QSignalBlocker b1(run_), b2(operand_);
    run_->clear();
    operand_->clear();
    store_->read([&](const TraceData& d) {
        for (int r = 0; r < static_cast<int>(d.meta.runs.size()); ++r) run_->addItem(run_label(d.meta, r));
        search_.setMeta(d.meta);
    });
    operand_->addItems(search_.labels());
    search_labels_->setStringList(search_.labels());
    run_->setCurrentIndex(std::min(selection_->run(), run_->count() - 1));
    operand_->setCurrentIndex(std::min(selection_->operand().slot(), operand_->count() - 1));
}

void CursorBar::showCursor() {
    const QSignalBlocker b1(slider_), b2(step_);
    const auto first = std::max<qint64>(0, cursor_->first()), last = std::max<qint64>(0, cursor_->last());
    slider_->setRange(static_cast<int>(first), static_cast<int>(last));
    step_->setRange(static_cast<int>(first), static_cast<int>(last));
    slider_->setValue(static_cast<int>(cursor_->step()));
    step_->setValue(static_cast<int>(cursor_->step()));
    follow_->setChecked(cursor_->mode() == StepCursor::Mode::Follow);
    pause_->setChecked(cursor_->mode() == StepCursor::Mode::Paused);
    play_->setChecked(cursor_->mode() == StepCursor::Mode::Playing);
}

void CursorBar::search(const QString& text) {
    if (const auto ref = search_.find(text)) selection_->setOperand(*ref);
    else if (!text.isEmpty()) search_box_->selectAll();  // nothing (or several) matched: type on
}
