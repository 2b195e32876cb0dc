// The main window's docks: one per view in the default arrangement (the analysis plots
// tabbed on top with most of the height, the tables tabbed in a short band below), the
// user's saved arrangement, View > Reset layout, and room for the start page: while nothing
// is open the docks step aside and the start page gets the window; the arrangement comes
// back when a trace opens.
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

    // The share of the docks' height the tables get in the default arrangement.
    static constexpr double kTableShare = 0.2;

    // The arrangement the user left (QSettings); screenshots skip this and keep the default.
    // False when there is no saved window geometry (a first start).
    bool restoreSaved();
    void save() const;
    void reset();
    // Nothing open: hides the docks, keeping their arrangement for when a trace opens.
    void setEmpty(bool empty);
    // The docks' show/hide actions and Reset layout.
    void fillMenu(QMenu* menu);
    // Brings the dock of view `name` to the front of its tab group; false when unknown.
    bool raise(const QString& name);

private:
    // Gives the plots the height and the tables kTableShare of it (the default sizes;
    // QMainWindow would split the height by the docks' size hints).
    void fitDefaultSizes();

    QMainWindow* window_;
    QByteArray default_state_;
    QByteArray shown_state_;  // while empty: the arrangement to bring back
    bool empty_ = false;
    bool default_sizes_ = true;  // not a saved arrangement: fit the sizes once shown
};
