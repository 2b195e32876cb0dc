// Any table model as CSV (RFC 4180 quoting), header row from the horizontal header.
// Numbers are written in full precision from kValueRole when the model gives one.
#pragma once

#include <QAbstractItemModel>
#include <QString>

namespace fp8scope::views {

QString table_csv(const QAbstractItemModel& model);
// False with `error` set when the file cannot be written.
bool write_table_csv(const QAbstractItemModel& model, const QString& path, QString* error);

}  // namespace fp8scope::views
