// Outliers view: log2 histograms of the selected GEMM operand kind for every layer at the
// cursor (layers x exponent bins), the selected operand's histogram over capture steps,
// kurtosis per layer (on a log axis when it spans decades), and the selected operand's per-channel absmax with outlier channels
// (above kOutlierFactor x the median) in red. The titles name operand, run and step; the
// histograms mark where E4M3's and E5M2's range (max, min normal, min subnormal) falls.
// A "compare with" run (the baseline by default) adds its kurtosis bars beside the
// selected run's and its channel absmax as a line over the bars, both runs at the newest
// capture step both recorded; the histograms stay the selected run's.
// For a SwiGLU model a fifth plot, below, follows the alignment of each MLP's gate and up
// rows over the capture steps (the largest |cos| of a channel's two rows, one line per
// layer, 0.9 marked), its title naming the most aligned layer at the cursor, the channel
// that leads it and that channel's amax in fc2's input against the median channel's.
#pragma once

#include "widgets/store_view.h"

class QCustomPlot;
class QCPBars;
class QCPGraph;

namespace fp8scope::views {

class CompareRunCombo;

class OutliersView : public StoreView {
    Q_OBJECT
public:
    static constexpr double kOutlierFactor = 8.0;
    explicit OutliersView(const ViewContext& ctx, QWidget* parent = nullptr);
    QCustomPlot* layersHeatmap() const { return layers_; }
    QCustomPlot* stepsHeatmap() const { return steps_; }
    QCustomPlot* kurtosisPlot() const { return kurtosis_; }
    QCustomPlot* channelPlot() const { return channels_; }
    QCustomPlot* alignmentPlot() const { return alignment_; }  // hidden without alignment rows
    // Channel absmax: the envelope (more channels than pixels) and the outlier points.
    QCPGraph* envelopeMax() const { return envelope_max_; }
    QCPGraph* envelopeMin() const { return envelope_min_; }
    QCPGraph* outlierChannels() const { return outliers_; }
    CompareRunCombo* compareRun() const { return compare_; }
    // Kurtosis bars of the selected and of the compared run (empty when none is compared).
    QCPBars* kurtosisBars() const { return kurtosis_run_; }
    QCPBars* otherKurtosisBars() const { return kurtosis_other_; }
    // The compared run's channel absmax (per pixel column's max when enveloped).
    QCPGraph* otherChannels() const { return other_channels_; }

protected:
    void redraw() override;

private:
    void drawLayers(const TraceData& d, const RunData& rd, std::int64_t step);
    void drawSteps(const TraceData& d, const RunData& rd, std::int64_t step);
    // `od`: the compared run `other`'s data, nullptr when none; `common`: the newest
    // capture step both recorded.
    void drawKurtosis(const TraceData& d, const RunData& rd, const RunData* od, int other, std::int64_t common,
                      std::int64_t step);
    void drawChannels(const TraceData& d, const RunData& rd, const RunData* od, int other, std::int64_t common,
                      std::int64_t step);
    void drawAlignment(const TraceData& d, const RunData& rd, std::int64_t step);
    CompareRunCombo* compare_;
    bool compared_ = false;  // another run is compared: the histograms' titles say they are not
    QCustomPlot *layers_, *steps_, *kurtosis_, *channels_, *alignment_;
    QCPBars *kurtosis_run_, *kurtosis_other_, *channel_bars_;
    QCPGraph *envelope_max_, *envelope_min_, *outliers_, *other_channels_;
};

// Channels [0, n) in `buckets` consecutive groups: each group's centre, min and max.
struct ChannelBucket {
    double channel, min, max;
};
std::vector<ChannelBucket> channel_envelope(std::span<const float> v, int buckets);

// The exponent range [lo, hi] holding counts in any of `hists`; false when all are empty.
bool histogram_extent(const std::vector<HistogramCounts>& hists, int& lo, int& hi);

}  // namespace fp8scope::views
