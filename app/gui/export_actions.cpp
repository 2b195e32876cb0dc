// Export dialogs. Each returns an empty string on success or cancel, else the error.
#include "export_actions.h"

#include <QFile>
#include <QFileDialog>

#include "models/chrome_trace.h"
#include "models/table_csv.h"

using namespace fp8scope::views;

QString export_view_image(QWidget* parent, const StoreView& view) {
    const QString path = QFileDialog::getSaveFileName(parent, QObject::tr("Export %1").arg(view.title()),
                                                      view.name() + ".png", QObject::tr("Images (*.png *.pdf)"));
    QString error;
    if (!path.isEmpty()) view.exportImage(path, &error);
    return error;
}

QString export_view_table(QWidget* parent, const StoreView& view) {
    if (!view.table()) return QObject::tr("the %1 view has no table").arg(view.title());
    const QString path = QFileDialog::getSaveFileName(parent, QObject::tr("Export table"), view.name() + ".csv",
                                                      QObject::tr("CSV (*.csv)"));
    QString error;
    if (!path.isEmpty()) write_table_csv(*view.table(), path, &error);
    return error;
}

QString export_timeline(QWidget* parent, const SeriesStore& store, int run, const std::vector<OperandRef>& operands) {
    const QString path = QFileDialog::getSaveFileName(parent, QObject::tr("Export timeline"), "timeline.json",
                                                      QObject::tr("Chrome trace (*.json)"));
    if (path.isEmpty()) return {};
    const QByteArray json = store.read([&](const TraceData& d) { return chrome_trace_json(d, run, d.first_step, d.last_step, operands); });
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(json) != json.size())
        return QStringLiteral("%1: %2").arg(path, f.errorString());
    return {};
}
