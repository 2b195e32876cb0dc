// Counter tracks under a timeline (the loss, the learning rate, operands' amax and scale):
// one thin row per track on the timeline's time axis, each value held from its step's
// start to the next step's, scaled to the track's own range over the steps shown, its
// name at the left and its value at the newest step at the right.
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>
#include <utility>
#include <vector>

namespace fp8scope::views {

class TimelineWidget;

struct StripTrack {
    QString name;
    std::vector<std::pair<double, double>> points;  // (start of the step, µs on the timeline; value)
};

class CounterStrip : public QWidget {
    Q_OBJECT
public:
    CounterStrip(const TimelineWidget* timeline, QWidget* parent = nullptr);
    void setTracks(std::vector<StripTrack> tracks);
    const std::vector<StripTrack>& tracks() const { return tracks_; }

protected:
    void paintEvent(QPaintEvent*) override;

private:
    const TimelineWidget* timeline_;
    std::vector<StripTrack> tracks_;
};

}  // namespace fp8scope::views
