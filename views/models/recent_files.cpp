// Recent files in QSettings ("recent").
#include "models/recent_files.h"

#include <QFileInfo>
#include <QSettings>

namespace fp8scope::views {

namespace {
constexpr const char* kKey = "recent";
}

QStringList RecentFiles::list() { return QSettings().value(kKey).toStringList(); }

void RecentFiles::add(const QString& path) {
    const QString absolute = QFileInfo(path).absoluteFilePath();
    QStringList recent = list();
    recent.removeAll(absolute);
    recent.removeAll(path);
    recent.prepend(absolute);
    QSettings().setValue(kKey, recent.mid(0, kMax));
}

}  // namespace fp8scope::views
