// CSV export of table models.
#include "models/table_csv.h"

#include <QFile>

#include "models/model_roles.h"

namespace fp8scope::views {

namespace {
QString field(const QVariant& v) {
    QString s;
    if (v.typeId() == QMetaType::Double) {
        const double d = v.toDouble();
        s = d != d ? QString() : QString::number(d, 'g', 17);
    } else {
        s = v.toString();
    }
    if (s.contains(QLatin1Char(',')) || s.contains(QLatin1Char('"')) || s.contains(QLatin1Char('\n')))
        s = QLatin1Char('"') + s.replace(QLatin1String("\""), QLatin1String("\"\"")) + QLatin1Char('"');
    return s;
}
}  // namespace

QString table_csv(const QAbstractItemModel& model) {
    QString out;
    const int cols = model.columnCount();
    for (int c = 0; c < cols; ++c)
        out += (c ? QStringLiteral(",") : QString()) + field(model.headerData(c, Qt::Horizontal, Qt::DisplayRole));
    out += QLatin1Char('\n');
    for (int r = 0; r < model.rowCount(); ++r) {
        for (int c = 0; c < cols; ++c) {
            const QModelIndex i = model.index(r, c);
            QVariant v = model.data(i, kValueRole);
            if (!v.isValid()) v = model.data(i, Qt::DisplayRole);
            out += (c ? QStringLiteral(",") : QString()) + field(v);
        }
        out += QLatin1Char('\n');
    }
    return out;
}

bool write_table_csv(const QAbstractItemModel& model, const QString& path, QString* error) {
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate | QIODevice::Text)) {
        if (error) *error = QStringLiteral("%1: %2").arg(path, f.errorString());
        return false;
    }
    f.write(table_csv(model).toUtf8());
    return true;
}

}  // namespace fp8scope::views
