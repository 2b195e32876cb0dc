// The main window's docks: one per view in the default arrangement (plots on the right,
// tables below), the user's saved arrangement, View > Reset layout, and room for the start
// page: while nothing is open the docks step aside and the start page gets the window; the
// arrangement comes back when a trace opens.
#pragma once

#include <QByteArray>
#include <QObject>
#include <vector>

class QMainWindow;
class QMenu;
namespace fp8scope::views { class StoreView; }

class DockLayout : public QObject {
    Q_OBJECT
public:
    DockLayout(QMainWindow* window, const std::vector<fp8scope::views::StoreView*>& views);

    // The arrangement the user left (QSettings); screenshots skip this and keep the default.
    void restoreSaved();
    void save() const;
    void reset();
    // Nothing open: hides the docks, keeping their arrangement for when a trace opens.
    void setEmpty(bool empty);
    // The docks' show/hide actions and Reset layout.
    void fillMenu(QMenu* menu);

private:
    QMainWindow* window_;
    QByteArray default_state_;
    QByteArray shown_state_;  // while empty: the arrangement to bring back
    bool empty_ = false;
};
