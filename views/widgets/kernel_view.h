// Kernels view: the run's device time per step stacked by category (StepCostPlot), the
// timeline of the op/kernel records per stream over the last N steps up to the cursor,
// and the per-kernel table over the cursor step or the whole run (calls, total, mean,
// median, p95, max, share of time; for GEMMs shape and TFLOP/s), grouped by kernel, op
// or category. Device records (kernel timing) get one lane per (device, stream) beside
// the CPU lanes, a colour per kernel kind, and a filter by kind and by layer that applies
// to the timeline and the table; selecting a table row highlights its records in the
// timeline. Where a GPU trace kept the individual kernel records only on some steps
// (`--kernel-timings capture`), a line says on which and that the statistics and the
// step costs come from every step (the kernel sums); the timeline of a step without
// them says so, and a live run is asked to record the next steps' kernels. Of a large trace
// opened as an overview, the timeline of steps before the newest asks for their records
// (kernelRecordsWanted), and the table at a cursor step whose kernel sums the decimation
// left out asks for them (kernelSumsWanted); each says while they are read.
// Kernels show short names (util/readable_kernel_name.h), the full name on hover; hovering
// or clicking an op or kernel draws the flows from the op to the kernels it launched. A
// strip under the lanes holds counters over the steps shown: the loss, the learning rate
// and the amax and scale of the operands the user names (else those picked in the selection). Beside the kernel table, a
// table compares the run's kernel time per op at the cursor step with another run's (the
// baseline by default): what FP8 saved, per GEMM.
#pragma once

#include <QSortFilterProxyModel>
#include <tuple>

#include "models/kernel_stats_model.h"
#include "models/op_time_comparison.h"
#include "widgets/store_view.h"

class QComboBox;
class QLineEdit;
class QTabWidget;
class QLabel;
class QPushButton;
class QSpinBox;
class QTableView;

namespace fp8scope::views {

class CompareRunCombo;
class CounterStrip;
class StepCostPlot;
class TimelineWidget;

class KernelView : public StoreView {
    Q_OBJECT
public:
    explicit KernelView(const ViewContext& ctx, QWidget* parent = nullptr);
    const QAbstractItemModel* table() const override { return &model_; }
    const KernelStatsModel& model() const { return model_; }
    TimelineWidget* timeline() const { return timeline_; }
    StepCostPlot* stepCosts() const { return costs_; }
    CounterStrip* counters() const { return strip_; }
    // The operands whose amax and scale the strip shows, as labels ("L0 qkv fprop x, ...");
    // returns the names that match no operand. Empty: the operands picked in the
    // selection (the Layers table, --select).
    QStringList setCounterOperands(const QString& labels);
    std::vector<OperandRef> counterOperands() const;
    const OpTimeComparisonModel& comparison() const { return compare_model_; }
    void compareWith(int run);  // the run the table compares the selected run with
    void showComparison(bool on);  // raises the comparison's tab (or the kernel table's)
    void setGrouping(KernelStatsModel::Grouping g);
    // Highlights the timeline records of table row `row` (-1: none).
    void selectRow(int row);
    void setScope(KernelStatsModel::Scope s);
    void setTimelineSteps(int n);
    void setKindFilter(KernelFilter f);
    void setLayerFilter(int layer);  // -1: all layers
    // What the view says of the run's kernel records ("" when every step kept them).
    QString detailNote() const;
    // What the table says of the cursor step's kernel sums ("" when the store holds them).
    QString tableNote() const;
    // A live run can be asked for the next steps' kernel records (RunControl).
    void setLiveControl(bool on);
    QPushButton* recordButton() const { return record_; }

signals:
    // The user asks the live run to keep every kernel record of the next `steps` steps.
    void recordKernelsRequested(int steps);

protected:
    void redraw() override;

private:
    KernelStatsModel model_;
    TimelineWidget* timeline_;
    StepCostPlot* costs_;
    QComboBox* grouping_;
    std::vector<StepKernel> box_kernels_;  // per timeline box; host boxes have device -1
    int costs_run_ = -1;
    QTableView* view_;
    QComboBox* scope_;
    QSpinBox* steps_;
    QComboBox* kind_;
    QComboBox* layer_;  // item data: the layer, -1 all
    QLabel* note_;
    QLabel* table_note_;
    QPushButton* record_;
    QSpinBox* record_steps_;
    int shown_scope_ = -1, shown_run_ = -1;  // of the table
    // The steps whose records were last asked for (kernelRecordsWanted), with the store's
    // generation, so that a redraw asks once.
    std::tuple<std::uint64_t, std::int64_t, std::int64_t> asked_{0, 0, -1};
    std::pair<std::uint64_t, std::int64_t> asked_sums_{0, 0};  // the same for kernelSumsWanted
    KernelSelection shown_filter_{KernelFilter::All, -2};
    CounterStrip* strip_;
    QLineEdit* operands_;
    std::vector<OperandRef> counter_operands_;
    QTabWidget* tabs_;
    OpTimeComparisonModel compare_model_;
    QSortFilterProxyModel compare_sorted_;
    CompareRunCombo* compare_run_;
    KernelSelection filter() const;
    void fillLayers();
    void highlight();
};

}  // namespace fp8scope::views
