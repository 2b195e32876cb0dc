// Launch spec to engine command line. Model presets are --set overrides of the default
// configuration: small enough to stream within seconds on a CPU.
#include "models/engine_launch.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <algorithm>

#include "fp8/training_recipe.h"

namespace fp8scope::views {

namespace {
QStringList preset_overrides(const QString& preset) {
    if (preset == "tiny")
        return {"model.n_layer=1", "model.d_model=32", "model.n_head=2", "model.max_seq=32", "batch_size=4",
                "seq_len=32", "data.corpus_bytes=65536"};
    if (preset == "small")
        return {"model.n_layer=2", "model.d_model=64", "model.n_head=2", "model.max_seq=64", "batch_size=8",
                "seq_len=64"};
    return {};  // "default": the engine's own configuration
}
}  // namespace

QStringList LaunchSpec::presets() { return {"tiny", "small", "default"}; }
QStringList LaunchSpec::devices() { return {"cpu", "cuda"}; }

QStringList LaunchSpec::recipeNames() {
    QStringList names;
    for (const std::string& n : training_recipe_names()) names << QString::fromStdString(n);
    return names;
}

int LaunchSpec::blockMapInterval() const {
    if (capture_every <= 0) return 0;
    if (blockmap_every >= 0) return blockmap_every;
    const int captures = std::max(1, steps / capture_every);
    return capture_every * std::max(1, captures / kBlockMapsPerRun);
}

QStringList LaunchSpec::arguments() const {
    if (!import_dir.isEmpty()) return {"import", import_dir, "--out", out, "--device", device, "--follow"};
    QStringList a{"train", "--quiet"};
    if (!config.isEmpty()) a << "--config" << config;
    a << "--device" << device;
    if (!socket.isEmpty()) a << "--listen" << socket;
    if (!token.isEmpty()) a << "--token" << token;
    if (!out.isEmpty()) a << "--out" << out;
    a << "--steps" << QString::number(steps) << "--capture-every" << QString::number(capture_every)
      << "--blockmap-every" << QString::number(blockMapInterval());
    if (!data.isEmpty()) a << "--data" << data;
    if (recipes.size() > 1) a << "--compare" << recipes.join(',');
    else if (!recipes.isEmpty()) a << "--recipe" << recipes.first();
    for (const QString& s : preset_overrides(preset)) a << "--set" << s;
    if (nproc_per_node > 1) a << "--nproc-per-node" << QString::number(nproc_per_node);
    return a;
}

QString capture_folder(const QString& path) {
    const QFileInfo f(path);
    const QString dir = f.isDir() ? f.absoluteFilePath() : f.fileName() == "manifest.json" ? f.absolutePath() : QString();
    return !dir.isEmpty() && QFileInfo(QDir(dir).filePath("manifest.json")).isFile() ? dir : QString();
}

QString engine_binary() {
    return QDir(QCoreApplication::applicationDirPath()).filePath("fp8scope-engine");
}

QString default_trace_path() {
    QDir dir(QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation));
    if (dir.path().isEmpty() || !dir.mkpath("runs")) dir = QDir(QDir::tempPath());
    else dir.cd("runs");
    return dir.filePath(QDateTime::currentDateTime().toString("'run-'yyyyMMdd-HHmmss-zzz'.h5'"));
}

}  // namespace fp8scope::views
