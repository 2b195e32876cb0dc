// Outliers view: log2 histograms of the selected GEMM operand kind for every layer at the
// cursor (layers x exponent bins), the selected operand's histogram over capture steps,
// kurtosis per layer (on a log axis when it spans decades), and the selected operand's per-channel absmax with outlier channels
// (above kOutlierFactor x the median) in red. The titles name operand, run and step; the
// histograms mark where E4M3's and E5M2's range (max, min normal, min subnormal) falls.
#pragma once

#include "widgets/store_view.h"

class QCustomPlot;
class QCPGraph;

namespace fp8scope::views {

class OutliersView : public StoreView {
    Q_OBJECT
public:
    static constexpr double kOutlierFactor = 8.0;
    explicit OutliersView(const ViewContext& ctx, QWidget* parent = nullptr);
    QCustomPlot* layersHeatmap() const { return layers_; }
    QCustomPlot* stepsHeatmap() const { return steps_; }
    QCustomPlot* kurtosisPlot() const { return kurtosis_; }
    QCustomPlot* channelPlot() const { return channels_; }
    // Channel absmax: the envelope (more channels than pixels) and the outlier points.
    QCPGraph* envelopeMax() const { return envelope_max_; }
    QCPGraph* envelopeMin() const { return envelope_min_; }
    QCPGraph* outlierChannels() const { return outliers_; }

protected:
    void redraw() override;

private:
    void drawLayers(const TraceData& d, const RunData& rd, std::int64_t step);
    void drawSteps(const TraceData& d, const RunData& rd, std::int64_t step);
    void drawChannels(const TraceData& d, const RunData& rd, std::int64_t step);
    QCustomPlot *layers_, *steps_, *kurtosis_, *channels_;
    QCPGraph *envelope_max_, *envelope_min_, *outliers_;
};

// Channels [0, n) in `buckets` consecutive groups: each group's centre, min and max.
struct ChannelBucket {
    double channel, min, max;
};
std::vector<ChannelBucket> channel_envelope(std::span<const float> v, int buckets);

// The exponent range [lo, hi] holding counts in any of `hists`; false when all are empty.
bool histogram_extent(const std::vector<HistogramCounts>& hists, int& lo, int& hi);

}  // namespace fp8scope::views
