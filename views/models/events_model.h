// The events table: rewinds, recipe switches, NaNs, pauses, checkpoints of every run,
// in step order (or those of one kind: the Health view's list). kStepRole gives the step
// to jump to.
#pragma once

#include <QAbstractTableModel>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::views {

class EventsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column { Step, Run, Kind, Detail, ColumnCount };

    explicit EventsModel(const SeriesStore* store, QObject* parent = nullptr);
    // Lists only events of these kinds from the next refresh() on.
    void showOnly(std::vector<EventKind> kinds) { only_ = std::move(kinds); }
    void refresh();

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    struct Row {
        qint64 step = 0;
        QString run, kind, detail;
    };
    const SeriesStore* store_;
    std::vector<Row> rows_;
    std::vector<EventKind> only_;  // empty: every kind
};

}  // namespace fp8scope::views
