// Events table model.
#include "models/events_model.h"

#include <algorithm>

#include "models/display_names.h"
#include "models/model_roles.h"

namespace fp8scope::views {

EventsModel::EventsModel(const SeriesStore* store, QObject* parent)
    : QAbstractTableModel(parent), store_(store) {}

void EventsModel::refresh() {
    std::vector<Row> rows = store_->read([this](const TraceData& d) {
        std::vector<Row> out;
        out.reserve(d.events.size());
        for (const auto& e : d.events)
            if (only_.empty() || std::find(only_.begin(), only_.end(), e.kind) != only_.end())
                out.push_back({e.step, event_run_label(d.meta, e.run), QString::fromLatin1(event_kind_name(e.kind)),
                               QString::fromStdString(e.detail)});
        return out;
    });
    beginResetModel();
    rows_ = std::move(rows);
    endResetModel();
}

int EventsModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}
int EventsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant EventsModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid)) return {};
    const Row& r = rows_[index.row()];
    if (role == kStepRole) return r.step;
    if (role == Qt::DisplayRole || role == kValueRole || role == Qt::ToolTipRole) {
        switch (index.column()) {
            case Step: return r.step;
            case Run: return r.run;
            case Kind: return r.kind;
            case Detail: return r.detail;
        }
    }
    return {};
}

QVariant EventsModel::headerData(int section, Qt::Orientation o, int role) const {
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[ColumnCount] = {"step", "run", "event", "detail"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

}  // namespace fp8scope::views
