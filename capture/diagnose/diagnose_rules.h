// Every threshold of diagnose's rules, in one place, each with why it has that value.
// README's "Diagnosing a trace" section lists them for users.
#pragma once

#include <cstdint>

#include "stats/gate_up_alignment.h"

namespace fp8scope::diagnose::rules {

// --- Severity: a finding's score in 0..100, its label from these bounds.
// Scores are ordered by cause: an injected fault the user planted leads, a non-finite
// value (the run is lost) next, then figures by how far they pass their thresholds.
inline constexpr double kWarningScore = 40;
inline constexpr double kCriticalScore = 70;
inline constexpr double kInjectionScore = 100;   // the leading finding when it harms a run
inline constexpr double kNonFiniteScore = 95;    // a NaN/Inf loss or amax ends a run's meaning
// An attribute trace's measured answer: a warning, so it stands above the inferred info
// findings of its own replicas but below real faults.
inline constexpr double kAttributionScore = 60;

// --- Settling: the first steps of training, where activations and gradients grow fast and
// delayed scaling, one step behind by design, overflows briefly in every healthy run. A
// finding inside it is capped at info. Twice the LR warmup: growth lasts past the warmup's
// end by about as long again in the engine's runs.
inline constexpr double kSettleWarmups = 2;
inline constexpr std::int64_t kSettleDefaultWarmup = 30;  // the engine's default warmup_steps

// --- Rule 1: loss gap to the baseline.
// Without seeds a gap cannot be told from seed noise; the engine's own runs differ by up to
// ~1.5% between seeds (README, Seeds), so only a gap three times that warns.
inline constexpr double kUnseededWarnGapPct = 5.0;
// A significant gap (its 95% interval excludes 0) of this size is critical: well past the
// 2% within which every FP8 recipe should stay (bench/compare_recipes.sh's goal).
inline constexpr double kCriticalGapPct = 5.0;

// --- Rule 2: operands whose error changed most before the gap's onset.
// The reference is the median of an operand's first captures after settling; 6 dB is one
// bit of precision lost (SQNR falls by 6.02 dB per bit), a change no rounding noise makes.
inline constexpr double kDriftWarnDb = 6.0;
// 15 dB (2.5 bits) lost leaves an E4M3 operand (~31 dB) near E5M2's level (~25 dB) or below.
inline constexpr double kDriftCriticalDb = 15.0;
inline constexpr int kReferenceCaptures = 3;  // captures the reference median is taken over
inline constexpr int kDriftTopOperands = 5;   // operands reported per run (the largest drops)

// A change that lasts one capture (or one step) and is gone at the next is delayed scaling's
// one-step lag meeting a jump, corrected by the next scale: capped at info unless it is past
// its critical bound.
inline constexpr int kTransientCaptures = 1;

// --- Fixes: another recipe's what-if must keep this much more SQNR on the same tensors to be
// suggested (half a bit), and within this much of the operand's reference to "keep" it.
inline constexpr double kFixMinGainDb = 3.0;
inline constexpr double kFixKeepsWithinDb = 3.0;

// --- Rule 3: bursts of overflow (= saturation: the saturating cast clamps what would
// overflow) and underflow against the operand's own history.
// A burst that costs the operand less than kFixMinGainDb of SQNR against the best FP8
// what-if of the same tensor clamps values nobody needed: info.
// A burst: a capture whose share exceeds kBurstFactor times the operand's median so far and
// at least the floor. 10x: an order of magnitude, beyond the step-to-step wobble (2-3x).
inline constexpr double kBurstFactor = 10.0;
inline constexpr int kBurstMinHistory = 2;  // captures of history before a burst can be judged
// Overflow floors in % of elements: 0.01% is ~1 element in 10^4, the largest wobble of
// per-tensor scaling on the engine's clean runs; 0.1% of saturated values costs ~1 dB of SQNR
// on a Gaussian tensor; 1% clamps the tail that carries the outliers' signal.
inline constexpr double kOverflowFloorPct = 0.01;
inline constexpr double kOverflowWarnPct = 0.1;
inline constexpr double kOverflowCriticalPct = 1.0;
// Underflow is a share of the nonzero values flushed to 0; a few % is normal for gradients.
// A burst must add 5 points (a clean run's share moves by < 2), 20 points warn, 50 are critical.
inline constexpr double kUnderflowFloorPts = 5.0;
inline constexpr double kUnderflowWarnPts = 20.0;
inline constexpr double kUnderflowCriticalPts = 50.0;

// --- Rule 4: delayed scaling's headroom fp8_max / (amax * scale).
// Below 1 the step overflowed. A headroom under 2 (one binade) with amax growing leaves at
// most a step or two at the growth rates of a spike.
inline constexpr double kHeadroomLow = 2.0;
// The growth rate is fitted over this many steps (log amax, least squares): a rate over the
// last few steps, not the run's average, is what a forecast needs.
inline constexpr int kGrowthWindow = 8;
// A forecast of overflow within this many steps warns, within kForecastCriticalSteps is critical.
inline constexpr double kForecastWarnSteps = 50;
inline constexpr double kForecastCriticalSteps = 10;
// A forecast warns only for amax growing this fast (doubling within ~7 steps): a diverging
// tensor. Slower growth overflows by at most the growth of one step, a few values clamped.
inline constexpr double kFastGrowthPerStep = 1.1;
// Growth below this per step is not growth (amax wobbles by ~1% a step in a steady run).
inline constexpr double kMinGrowthPerStep = 1.01;
// The first steps on scale 1 (no history yet): info; their SQNR at that step is quoted.

// --- Rule 5: kurtosis of activations (x operands), reported to rise before FP8 divergence
// (outlier features). A Gaussian has 3; the engine's activations start near 3-10. A rise by
// 4x to at least 30 is an outlier channel forming; 10x to 100 a dominant one.
inline constexpr double kKurtosisGrowthWarn = 4.0;
inline constexpr double kKurtosisMinWarn = 30.0;
inline constexpr double kKurtosisGrowthCritical = 10.0;
inline constexpr double kKurtosisMinCritical = 100.0;

// --- Rule 6: a rewind lists the findings of the capture intervals before it.
inline constexpr std::int64_t kRewindLookbackCaptures = 3;

// --- Rule 7: an injection harms a run's recipe when, on the injected operand, the
// quantizer in use loses kInjectionHarmDb of SQNR (half a bit, past capture-to-capture
// noise of ~1 dB) against the capture before the injection, overflows kOverflowFloorPct
// more, underflows kUnderflowFloorPts more (an outlier that sets a per-tensor scale keeps
// SQNR, which its own energy dominates, while it flushes the other values to 0), or the GEMM's output loses kInjectionHarmDb.
inline constexpr double kInjectionHarmDb = 3.0;

// --- Rule 8: a SwiGLU MLP's gate and up rows aligning (Fishman et al. 2024). Random rows of
// width C have |cos| ~ sqrt(2 / (pi C)) and the largest of H channels ~ sqrt(2 ln(2H) / C):
// 0.15 for C = 768, H = 2048. The reference is the median of the first kReferenceCaptures
// captures' max |cos| (the initial weights); a max that has grown kAlignmentGrowth-fold to
// kAlignmentWarnCos (the rows within 60 degrees: silu(w1.x) (w3.x) already half the square
// of the input's projection) warns; past stats::kAlignedCos (0.9, within 26 degrees, the
// aligned channels Smooth-SwiGLU was made for) it is critical.
inline constexpr double kAlignmentGrowth = 2.0;
inline constexpr double kAlignmentWarnCos = 0.5;
inline constexpr double kAlignmentCriticalCos = stats::kAlignedCos;

}  // namespace fp8scope::diagnose::rules
