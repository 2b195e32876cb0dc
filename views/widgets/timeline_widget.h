// The op/kernel timeline of one step: one lane per (device, stream), a box per op, zoom
// with the mouse wheel and pan by dragging. Painted directly rather than through
// QCustomPlot items, which cost an object per op. Double-clicking a box zooms to it (one
// kernel), the right button back to the whole range. Boxes of a selected table row are
// outlined, the others faded. Given which box launched which (a host op its kernels),
// hovering or clicking an op or kernel draws the flows from the op to every kernel it
// launched.
#pragma once

#include <QColor>
#include <QWidget>
#include <vector>

namespace fp8scope::views {

struct TimelineBox {
    QString name;
    int lane = 0;
    double start_us = 0, end_us = 0;  // relative to the first op shown
    int color = 0;                    // op id, for a stable colour per op name
    QColor fill;                      // when valid, used instead (kernels: by kind)
    QString detail;                   // more lines for the tooltip (a kernel's full name, operand, GEMM)
    bool highlighted = false;         // of the table's selected row (setHighlighted)
};

class TimelineWidget : public QWidget {
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);
    // `launcher`: per box, the index of the box that launched it (-1 none); empty: no flows.
    void setBoxes(std::vector<TimelineBox> boxes, QStringList lanes, std::vector<int> launcher = {});
    // A line said over the lanes (which steps kept their kernel records); empty: none.
    void setNote(const QString& note);
    const QString& note() const { return note_; }
    const std::vector<TimelineBox>& boxes() const { return boxes_; }
    const QStringList& lanes() const { return lanes_; }
    // Zooms to one box with a little margin either side (zero-length boxes too).
    void zoomTo(const TimelineBox& b);
    // Visible time range in microseconds.
    double viewStart() const { return view_start_; }
    double viewEnd() const { return view_end_; }
    void setView(double start_us, double end_us);
    void resetView();
    // Marks the boxes of `on` (one flag per box, in boxes() order) and fades the others;
    // all false (or empty) shows every box plainly.
    void setHighlighted(const std::vector<bool>& on);
    bool highlighting() const { return highlighting_; }
    double xOf(double us) const { return toX(us); }  // widget x of a time, for tests
    int labelWidthPx() const { return label_width_; }
    // The box whose flows are drawn (clicked, else hovered; -1 none) and the flows drawn
    // for it: (launching box, launched box) pairs.
    void selectBox(int box);
    int focusBox() const { return selected_ >= 0 ? selected_ : hover_; }
    std::vector<std::pair<int, int>> shownFlows() const;

signals:
    void viewChanged();  // the visible time range moved

protected:
    void paintEvent(QPaintEvent*) override;
    void wheelEvent(QWheelEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;
    void mouseDoubleClickEvent(QMouseEvent* e) override;
    bool event(QEvent* e) override;  // tooltips

private:
    double toX(double us) const;
    double toUs(double x) const;
    int labelWidth() const;
    const TimelineBox* boxAt(QPoint p) const;
    int indexAt(QPoint p) const;
    QRectF boxRect(const TimelineBox& b) const;

    std::vector<TimelineBox> boxes_;
    QStringList lanes_;
    QString note_;
    int label_width_ = 110;  // fits the longest lane label
    double total_us_ = 1, view_start_ = 0, view_end_ = 1;
    bool highlighting_ = false;
    std::vector<int> launcher_;
    int hover_ = -1, selected_ = -1;
    int drag_x_ = 0;
    double drag_start_ = 0;
};

}  // namespace fp8scope::views
