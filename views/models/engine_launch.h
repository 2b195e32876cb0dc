// What the Launch dialog asks for, and the `fp8scope-engine train` command line it
// becomes. Kept apart from the process so the command line is tested on its own.
#pragma once

#include <QString>
#include <QStringList>

namespace fp8scope::views {

struct LaunchSpec {
    // The lock-step comparison a new run trains by default (the Run menu's first run, the
    // Launch dialog's ticks): the float32 reference against per-tensor delayed, blockwise
    // and MXFP8 scaling. Spelled only here; each name is one of recipeNames() (tested).
    static inline const QStringList kDefaultLockStep{"baseline", "delayed", "blockwise", "mxfp8"};

    QString config;             // a JSON run configuration the rest overrides (optional)
    QString device = "cpu";     // cpu or cuda (an engine built with CUDA, on a GPU machine)
    QString preset = "tiny";    // model size: tiny, small, default (see presets())
    QString data = "builtin";   // builtin, text:PATH, tokens:PATH
    int steps = 200;
    QStringList recipes = kDefaultLockStep;  // several: lock step
    int capture_every = 10;     // operand statistics every N steps (0: off)
    // Block maps every N steps; -1: blockMapInterval() picks one that gives about
    // kBlockMapsPerRun maps over the run (the engine's own default, 10 x the capture
    // interval, can be longer than a short run: no maps at all past step 1).
    int blockmap_every = -1;
    static constexpr int kBlockMapsPerRun = 8;
    // Data-parallel processes on this machine, one per GPU (1: a single process); rank 0
    // writes the trace and serves the live stream with every rank's step times.
    int nproc_per_node = 1;
    static constexpr int kMaxProcsPerNode = 8;
    QString out;                // the trace file the engine writes
    QString socket;             // the engine's live socket (unix:PATH)
    QString token;              // empty on a local socket
    // A PyTorch capture folder (python/fp8scope_torch): the engine imports it into `out`
    // and follows it while the run adds steps (`import --follow`) instead of training.
    QString import_dir;

    static QStringList presets();
    static QStringList devices();  // what the engine's --device takes
    // Every training recipe the engine knows, from core's list (training_recipe_names()).
    static QStringList recipeNames();
    // The block-map interval passed to the engine: a multiple of the capture interval
    // (maps are taken on capture steps); 0 when nothing is captured.
    int blockMapInterval() const;
    // Arguments after the engine binary.
    QStringList arguments() const;
};

// The folder when `path` is a PyTorch capture folder or its manifest.json; else empty.
QString capture_folder(const QString& path);

// The engine binary next to the running GUI binary (build/bin/ holds both).
QString engine_binary();
// A fresh trace file in the user's data folder: .../fp8scope/runs/run-YYYYmmdd-HHMMSS.h5.
QString default_trace_path();

}  // namespace fp8scope::views
