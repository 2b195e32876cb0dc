// A data-parallel job's traces in one folder, as the engine writes them: `run.h5` from rank
// 0 and `run.rank1.h5`, `run.rank2.h5`, ... from the others. Opened together they are one
// job: every rank's runs side by side ("rank 1: baseline"), the Health view across the
// ranks (rank 0's trace holds every rank's step times), and the Kernels view with a lane
// per rank and stream (job_runs).
#pragma once

#include <QString>
#include <QStringList>

namespace fp8scope::views {

struct RankFolder {
    QStringList paths;  // rank 0's trace first, then rank 1's, ...
    QString error;      // why the folder is not one job's traces (paths then empty)
};

// The rank traces in `dir`. A folder with one trace and no rank traces is a job of one.
// An error names the folder: no traces, the traces of several jobs, or a rank trace
// whose rank 0 trace is missing.
RankFolder rank_folder(const QString& dir);

}  // namespace fp8scope::views
