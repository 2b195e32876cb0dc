// Finding a job's rank traces in a folder (rank_folder.h).
#include "models/rank_folder.h"

#include <QDir>
#include <QRegularExpression>
#include <map>

namespace fp8scope::views {

RankFolder rank_folder(const QString& dir) {
    RankFolder out;
    const QDir d(dir);
    if (!d.exists()) {
        out.error = QObject::tr("%1: no such folder").arg(dir);
        return out;
    }
    // stem -> rank -> file; "run.h5" is rank 0 of "run", "run.rank3.h5" rank 3.
    static const QRegularExpression rank_name(QStringLiteral("^(.*)\\.rank(\\d+)\\.(h5|hdf5)$"));
    std::map<QString, std::map<int, QString>> jobs;
    for (const QString& name : d.entryList({"*.h5", "*.hdf5"}, QDir::Files, QDir::Name)) {
        if (const auto m = rank_name.match(name); m.hasMatch())
            jobs[m.captured(1)][m.captured(2).toInt()] = d.filePath(name);
        else
            jobs[QFileInfo(name).completeBaseName()][0] = d.filePath(name);
    }
    if (jobs.empty()) {
        out.error = QObject::tr("%1: no trace files (*.h5) in the folder").arg(dir);
        return out;
    }
    // Several stems: the job is the one with rank traces, when only one has them.
    std::vector<const std::map<int, QString>*> with_ranks;
    for (const auto& [stem, ranks] : jobs)
        if (ranks.size() > 1 || !ranks.count(0)) with_ranks.push_back(&ranks);
    if (jobs.size() > 1 && with_ranks.size() != 1) {
        QStringList stems;
        for (const auto& [stem, ranks] : jobs) stems << stem;
        out.error = QObject::tr("%1: the traces of several runs (%2); open one of the files, or a folder of one "
                                "job's rank traces").arg(dir, stems.join(", "));
        return out;
    }
    const auto& ranks = with_ranks.empty() ? jobs.begin()->second : *with_ranks.front();
    if (!ranks.count(0)) {
        out.error = QObject::tr("%1: rank traces without rank 0's trace (%2)").arg(dir, QFileInfo(ranks.begin()->second).fileName());
        return out;
    }
    for (const auto& [rank, path] : ranks) out.paths << path;
    return out;
}

}  // namespace fp8scope::views
