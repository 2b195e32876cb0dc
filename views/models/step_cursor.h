// The one step cursor all views share. Follow mode keeps it on the newest step of a live
// run; moving it by hand pauses following; replay plays through the steps on a clock.
#pragma once

#include <QObject>
#include <QTimer>
#include <cstdint>

namespace fp8scope::views {

class StepCursor : public QObject {
    Q_OBJECT
public:
    enum class Mode { Follow, Paused, Playing };
    Q_ENUM(Mode)

    explicit StepCursor(QObject* parent = nullptr);

    std::int64_t step() const { return step_; }
    std::int64_t first() const { return first_; }
    std::int64_t last() const { return last_; }
    Mode mode() const { return mode_; }

    // The steps the store holds; in follow mode the cursor moves to `last`.
    void setRange(std::int64_t first, std::int64_t last);
    // A step chosen by the user: clamps to the range and stops following or playing.
    void setStep(std::int64_t step);
    void follow();
    void pause();
    // Replay: advances `stride` steps every `interval_ms`, stops at the end.
    void play(std::int64_t stride = 1, int interval_ms = 40);

signals:
    void stepChanged(qint64 step);
    void modeChanged(fp8scope::views::StepCursor::Mode mode);
    void rangeChanged(qint64 first, qint64 last);

private:
    void move(std::int64_t step);
    void setMode(Mode m);
    void tick();

    std::int64_t step_ = -1, first_ = -1, last_ = -1, stride_ = 1;
    Mode mode_ = Mode::Follow;
    QTimer clock_;
};

}  // namespace fp8scope::views
