// A training run the GUI started: `fp8scope-engine train ...` as a child process. It
// says when the engine's live socket and its trace file appear (so the GUI can attach
// or follow) and how the engine ended; a missing binary, a refused command line or a
// crash end in failed() with the engine's own last words.
#pragma once

#include <QObject>
#include <QProcess>
#include <QTimer>

#include "models/engine_launch.h"

namespace fp8scope::views {

class EngineProcess : public QObject {
    Q_OBJECT
public:
    explicit EngineProcess(QObject* parent = nullptr);
    ~EngineProcess() override;  // stops a running engine

    // Starts `binary` with spec.arguments(); false (and failed()) when it cannot start.
    bool start(const LaunchSpec& spec, const QString& binary = engine_binary());
    bool running() const { return process_.state() != QProcess::NotRunning; }
    const LaunchSpec& spec() const { return spec_; }
    // Asks the engine to end (SIGTERM), kills it after `grace_ms`.
    void stop(int grace_ms = 3000);

signals:
    void socketReady(const QString& endpoint);  // "unix:PATH", once
    void traceReady(const QString& path);       // the --out file exists, once
    void finished(const QString& message);      // ended normally
    void failed(const QString& message);        // could not start, error exit, crash

private:
    void watch();
    void onFinished(int code, QProcess::ExitStatus status);
    QString lastWords() const;

    QProcess process_;
    QTimer watch_;
    LaunchSpec spec_;
    QString stderr_tail_;
    bool socket_seen_ = false, trace_seen_ = false, stopping_ = false;
};

}  // namespace fp8scope::views
