// The engine child process. Its stderr is kept (the tail only) to explain a failure;
// the socket and trace file are looked for on a short timer rather than a file watcher,
// since their folder may not exist yet when the engine starts.
#include "models/engine_process.h"

#include <QFileInfo>

namespace fp8scope::views {

namespace {
constexpr int kTailChars = 4000;
constexpr int kWatchMs = 100;

QString socket_file(const QString& endpoint) {
    return endpoint.startsWith("unix:") ? endpoint.mid(5) : QString();
}
}  // namespace

EngineProcess::EngineProcess(QObject* parent) : QObject(parent) {
    process_.setProcessChannelMode(QProcess::SeparateChannels);
    process_.setStandardOutputFile(QProcess::nullDevice());
    connect(&process_, &QProcess::readyReadStandardError, this, [this] {
        stderr_tail_ += QString::fromLocal8Bit(process_.readAllStandardError());
        if (stderr_tail_.size() > kTailChars) stderr_tail_ = stderr_tail_.right(kTailChars);
    });
    connect(&process_, &QProcess::finished, this, &EngineProcess::onFinished);
    connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
        if (e == QProcess::FailedToStart)
            emit failed(tr("cannot start the engine %1: %2").arg(process_.program(), process_.errorString()));
    });
    connect(&watch_, &QTimer::timeout, this, &EngineProcess::watch);
}

EngineProcess::~EngineProcess() {
    if (running()) {
        process_.disconnect(this);
        stop(2000);
    }
}

bool EngineProcess::start(const LaunchSpec& spec, const QString& binary) {
    if (running()) {
        emit failed(tr("a run is already going; stop it first"));
        return false;
    }
    if (!QFileInfo(binary).isExecutable()) {
        emit failed(tr("no engine binary at %1 (build the fp8scope-engine target)").arg(binary));
        return false;
    }
    spec_ = spec;
    stderr_tail_.clear();
    socket_seen_ = trace_seen_ = stopping_ = false;
    process_.start(binary, spec.arguments());
    if (!process_.waitForStarted(5000)) return false;  // errorOccurred said why
    watch_.start(kWatchMs);
    return true;
}

void EngineProcess::stop(int grace_ms) {
    if (!running()) return;
    stopping_ = true;
    process_.terminate();
    if (!process_.waitForFinished(grace_ms)) {
        process_.kill();
        process_.waitForFinished(grace_ms);
    }
}

void EngineProcess::watch() {
    const QString sock = socket_file(spec_.socket);
    if (!socket_seen_ && !sock.isEmpty() && QFileInfo::exists(sock)) {
        socket_seen_ = true;
        emit socketReady(spec_.socket);
    }
    if (!trace_seen_ && !spec_.out.isEmpty() && QFileInfo(spec_.out).size() > 0) {
        trace_seen_ = true;
        emit traceReady(spec_.out);
    }
    if (socket_seen_ == !sock.isEmpty() && trace_seen_ == !spec_.out.isEmpty()) watch_.stop();
}

QString EngineProcess::lastWords() const {
    QStringList lines = stderr_tail_.trimmed().split('\n', Qt::SkipEmptyParts);
    while (lines.size() > 3) lines.removeFirst();
    return lines.join(" / ").trimmed();
}

void EngineProcess::onFinished(int code, QProcess::ExitStatus status) {
    // A short run can write its whole trace between two ticks of the watch timer.
    if (code == 0 && status == QProcess::NormalExit) watch();
    watch_.stop();
    stderr_tail_ += QString::fromLocal8Bit(process_.readAllStandardError());
    const QString words = lastWords();
    if (stopping_) emit finished(tr("engine stopped"));
    else if (status == QProcess::CrashExit)
        emit failed(tr("the engine crashed%1").arg(words.isEmpty() ? QString() : ": " + words));
    else if (code != 0)
        emit failed(tr("the engine exited with status %1%2").arg(code).arg(words.isEmpty() ? QString() : ": " + words));
    else emit finished(tr("the run finished"));
}

}  // namespace fp8scope::views
