// The File > Open recent list, kept in QSettings: absolute paths, newest first, each once,
// so an entry opens the same file whatever directory the app is started from.
#pragma once

#include <QStringList>

namespace fp8scope::views {

class RecentFiles {
public:
    static constexpr int kMax = 10;
    // The list as stored (entries written by older versions may be relative).
    static QStringList list();
    // Puts `path` first, as an absolute path; drops its older entry and the oldest past kMax.
    static void add(const QString& path);
};

}  // namespace fp8scope::views
