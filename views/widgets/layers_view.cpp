// Layers table view.
#include "widgets/layers_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

#include "models/display_names.h"
#include "models/model_roles.h"
#include "widgets/compare_run_combo.h"
#include "widgets/recipe_combo.h"

namespace fp8scope::views {

LayersView::LayersView(const ViewContext& context, QWidget* parent)
    : StoreView(context, "layers", tr("Layers"), parent), model_(context.store) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    filter_ = new QLineEdit(this);
    filter_->setPlaceholderText(tr("filter: linear, gemm, operand or quantizer (e.g. mlp, dgrad)"));
    filter_->setClearButtonEnabled(true);
    what_if_ = new QComboBox(this);
    what_if_->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    what_if_->setToolTip(tr("the analysis quantizer whose error figures an unquantized (baseline) operand shows"));
    proxy_ = new QSortFilterProxyModel(this);
    proxy_->setSourceModel(&model_);
    proxy_->setSortRole(kValueRole);
    proxy_->setFilterKeyColumn(-1);
    proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
    view_ = new QTableView(this);
    view_->setModel(proxy_);
    view_->setSortingEnabled(true);
    view_->sortByColumn(-1, Qt::AscendingOrder);
    view_->setSelectionBehavior(QAbstractItemView::SelectRows);
    view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
    view_->verticalHeader()->hide();
    // Numbers on one line: columns fit their contents, long linear names are elided.
    view_->setWordWrap(false);
    view_->setTextElideMode(Qt::ElideMiddle);
    view_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    view_->horizontalHeader()->setSectionResizeMode(LayersModel::Linear, QHeaderView::Interactive);
    auto* row = new QHBoxLayout;
    row->addWidget(filter_, 1);
    row->addWidget(new QLabel(tr("baseline what-if:"), this));
    row->addWidget(what_if_);
    compare_ = new CompareRunCombo(this);
    row->addWidget(new QLabel(tr("compare with:"), this));
    row->addWidget(compare_);
    layout->addLayout(row);
    note_ = new QLabel(this);
    note_->setWordWrap(true);
    note_->hide();
    layout->addWidget(note_);
    layout->addWidget(view_);
    // Filtering hides rows, it does not unselect their operands.
    connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
        syncing_ = true;
        proxy_->setFilterFixedString(text);
        syncing_ = false;
        showSelection();
    });
    connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this, &LayersView::takeSelection);
    connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &LayersView::takeSelection);
    connect(context.selection, &Selection::changed, this, &LayersView::showSelection);
    connect(what_if_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
    connect(compare_, &QComboBox::currentIndexChanged, this, [this] { refresh(true); });
}

std::vector<OperandRef> LayersView::selectedOperands() const {
    std::vector<OperandRef> refs;
    for (const QModelIndex& i : view_->selectionModel()->selectedRows())
        refs.push_back(model_.operandAt(proxy_->mapToSource(i).row()));
    std::sort(refs.begin(), refs.end(), slot_order);
    return refs;
}

void LayersView::takeSelection() {
    if (syncing_) return;
    std::vector<OperandRef> refs = selectedOperands();
    if (refs.empty()) return;  // a table being reset, not a choice
    // The current operand is the focused row once it is selected (a Ctrl-click moves the
    // focus before it toggles the row), else the previous one while it stays selected.
    OperandRef current = ctx().selection->operand();
    const QModelIndex focus = view_->currentIndex();
    if (focus.isValid() && view_->selectionModel()->isRowSelected(focus.row(), focus.parent()))
        current = model_.operandAt(proxy_->mapToSource(focus).row());
    else if (std::find(refs.begin(), refs.end(), current) == refs.end())
        current = refs.front();
    syncing_ = true;  // the echo must not reset a selection the user is still making
    ctx().selection->setOperands(std::move(refs), current);
    syncing_ = false;
}

void LayersView::showSelection() {
    if (syncing_) return;
    QItemSelection rows;
    for (const OperandRef& ref : ctx().selection->operands())
        if (const int row = model_.rowOf(ref); row >= 0)
            if (const QModelIndex i = proxy_->mapFromSource(model_.index(row, 0)); i.isValid()) rows.select(i, i);
    const QModelIndex current = proxy_->mapFromSource(model_.index(model_.rowOf(ctx().selection->operand()), 0));
    syncing_ = true;
    view_->selectionModel()->select(rows, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    if (current.isValid()) view_->selectionModel()->setCurrentIndex(current, QItemSelectionModel::NoUpdate);
    syncing_ = false;
}

QString LayersView::scalingNote() const { return note_->text(); }

void LayersView::redraw() {
    const bool first = model_.rowCount() == 0, was_compared = model_.compared();
    const int rows = model_.rowCount();
    const int run = ctx().selection->run();
    const std::int64_t step = ctx().cursor->step();
    const auto [note, want] = ctx().store->read([&](const TraceData& d) {
        return std::pair(scaling_note(d, run, step), scaling_wanted(d, run, step));
    });
    note_->setText(note);
    note_->setVisible(!note.isEmpty());
    if (want && std::pair(ctx().store->generation(), step) != asked_) {
        asked_ = {ctx().store->generation(), step};
        emit scalingWanted(step);
    }
    if (dataChanged())
        ctx().store->read([&](const TraceData& d) {
            fill_recipe_combo(what_if_, quantizer_labels(d.meta));
            compare_->fill(d.meta);
        });
    const int other = compare_->otherThan(run);
    syncing_ = true;
    model_.refresh(run, ctx().cursor->step(), what_if_->currentIndex(), other);
    syncing_ = false;
    if (model_.rowCount() == 0) return;
    // Another run's figures (a baseline has no recipe or scale) need other widths.
    if (run != sized_run_ || other != sized_other_) {
        view_->resizeColumnsToContents();
        sized_run_ = run;
        sized_other_ = other;
    }
    // Each delta beside its figure; a reset (delta columns come or go) forgets both the
    // order and the table's selection.
    if (model_.compared() && !was_compared) {
        QHeaderView* header = view_->horizontalHeader();
        for (int c = 0; c < LayersModel::kDeltaColumns; ++c)
            header->moveSection(header->visualIndex(LayersModel::ColumnCount + c),
                                header->visualIndex(LayersModel::kDeltaOf[c]) + 1);
    }
    // A reset (rows merged or split as figures arrive, delta columns) forgets the selection.
    if (first || model_.compared() != was_compared || model_.rowCount() != rows) showSelection();
}

}  // namespace fp8scope::views
