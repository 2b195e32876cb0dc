// The coalescing redraw timer: any number of store appends, cursor moves and selection
// changes within one interval cause one refresh of each registered client.
#pragma once

#include <QObject>
#include <QTimer>
#include <functional>
#include <vector>

namespace fp8scope::views {

class RedrawScheduler : public QObject {
    Q_OBJECT
public:
    explicit RedrawScheduler(int interval_ms = 33, QObject* parent = nullptr);

    // Called on every refresh, in the order added.
    void addClient(std::function<void()> refresh);
    int refreshCount() const { return refreshes_; }

public slots:
    // Thread-safe through a queued connection; cheap to call often.
    void markDirty();
    // Runs the pending refresh now (screenshots, tests).
    void flush();

private:
    QTimer timer_;
    std::vector<std::function<void()>> clients_;
    int refreshes_ = 0;
};

}  // namespace fp8scope::views
