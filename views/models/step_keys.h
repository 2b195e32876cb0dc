// Keyboard stepping of the shared step cursor: Left/Right move to the previous/next capture
// step of the selected run (every recorded step when the run has no capture step), Page
// Up/Down ten capture steps, Home/End the first/last step. Capture steps are where operand
// figures change, so one key press always shows new statistics.
#pragma once

#include <QKeySequence>
#include <QObject>
#include <QString>
#include <cstdint>
#include <vector>

#include "models/selection.h"
#include "models/series_store.h"
#include "models/step_cursor.h"

namespace fp8scope::views {

// The step `n` places from `current` in ascending `steps` (n < 0: back); `current` need not
// be one of them. Stops at either end; `current` when `steps` is empty.
std::int64_t step_after(const std::vector<std::int64_t>& steps, std::int64_t current, int n);

class StepKeys : public QObject {
    Q_OBJECT
public:
    static constexpr int kPage = 10;

    StepKeys(const SeriesStore* store, StepCursor* cursor, const Selection* selection, QObject* parent = nullptr);

    void by(int n);  // n capture steps forward (n < 0: back)
    void toFirst();
    void toLast();
    // The keys above on `window`: a key press that no widget in it took (a table, a text
    // box or the slider keep their own arrow keys) moves the cursor.
    void bind(QObject* window);

    struct Key {
        QKeySequence keys;
        QString what;
    };
    static std::vector<Key> keys();  // for the shortcut list

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    std::vector<std::int64_t> stops() const;  // the steps the keys move between

    const SeriesStore* store_;
    StepCursor* cursor_;
    const Selection* selection_;
};

}  // namespace fp8scope::views
