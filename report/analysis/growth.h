// Growth verdict (docs/pytorch.md): which allocation sites hold more memory at
// every training-step boundary, steadily, after warm-up.
//
// The test starts from Ray's growth check (a linear fit of live bytes against
// step, flagged when the slope is positive, r is high and the growth clears a
// floor) and adds two things Ray's test does not need in its setting:
//
//  * a warm-up exclusion, because a GPU training loop legitimately grows its
//    caches (allocator segments, cuBLAS workspaces, autotuning buffers) in the
//    first steps; and
//  * a "still growing at the end" check: the slope over the last part of the
//    series must be a real fraction of the overall slope. A cache that warms
//    up for longer than the warm-up exclusion and then plateaus fits a line
//    with a positive slope and a fair r, but its last part is flat, so it is
//    not flagged. So is a site whose memory is released late in the run.
//
// All thresholds are options so the CLI can expose them.
#pragma once

#include <cstddef>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/symbols/symbolizer.h"
#include "report/model/report_model.h"

namespace torchseal {

// One of Ray's (slope, r) tiers: flagged when slope > min_slope (bytes per
// step) and r > min_r. A shallower slope needs a straighter line.
struct GrowthTier {
  double min_slope = 0;
  double min_r = 1;
};

struct GrowthOptions {
  // Leading samples excluded from the fit: max(warmup_min_steps,
  // ceil(warmup_fraction * samples)). A fixed count alone is wrong for both
  // short and long runs: 2 steps is enough for PyTorch's caching allocator
  // and cuBLAS/cuDNN workspaces in a 10-step test, while a long run may have
  // an epoch-scale warm-up (first validation pass, dataloader prefetch), and
  // excluding 20% still leaves 80% of a long run to show a leak.
  size_t warmup_min_steps = 2;
  double warmup_fraction = 0.2;

  // Samples that must remain after warm-up. A correlation over very few
  // points is easy to reach by chance: for pure noise P(r > 0.875) is about
  // 2.6% with 5 points but 0.2% with 8. With the defaults a 10-step run is
  // the shortest that can be judged.
  size_t min_fit_steps = 8;

  // The fitted growth over the fit window (slope * span) must exceed this.
  // Ray uses 1000 B for the Python heap, where interpreter noise lives in
  // the hundreds of bytes. Device memory has no such noise (every byte is a
  // deliberate cudaMalloc-family call, at least 512 B), so the floor only
  // has to reject rounding-level drift; 1 KiB keeps Ray's scale.
  double min_growth_bytes = 1024;

  // Ray's tiers, in bytes per step. For GPU allocations the slope bars are
  // almost always cleared; the r bars are what separates steady growth from
  // fluctuation.
  std::vector<GrowthTier> tiers = {{60, 0.875}, {20, 0.9}, {10, 0.95}};

  // The "still growing" check: the last max(tail_min_steps,
  // ceil(tail_fraction * fitted samples)) samples are fitted on their own
  // and their slope must be at least tail_slope_ratio * the overall slope.
  // tail_min_steps = 5 makes a staircase (one allocation every k <= 4 steps)
  // always show a step inside the tail; a slower staircase needs a run long
  // enough that a third of it spans several periods. A ratio of 0.25 accepts
  // a noisy straight leak (its tail slope scatters around the overall slope)
  // and rejects a plateau (tail slope ~0) or a cache whose growth has slowed
  // to a quarter of its average rate.
  size_t tail_min_steps = 5;
  double tail_fraction = 1.0 / 3.0;
  double tail_slope_ratio = 0.25;
};

// Why a series was (not) flagged; tests and verbose output use it.
enum class GrowthVerdict {
  Flagged,
  TooFewSteps,  // fewer than min_fit_steps samples after warm-up
  NotGrowing,   // slope <= 0, or constant after warm-up (sawtooth freed within a step)
  BelowFloor,   // fitted growth <= min_growth_bytes
  NotSteady,    // no (slope, r) tier satisfied
  Plateaued,    // growth stopped (or reversed) in the last part of the series
};

const char *growth_verdict_name(GrowthVerdict v);

struct GrowthFit {
  GrowthVerdict verdict = GrowthVerdict::TooFewSteps;
  bool flagged = false;
  size_t first = 0;         // index of the first sample used (warm-up skipped)
  size_t steps = 0;         // samples used in the fit
  double slope = 0;         // bytes per step (per unit of x)
  double r = 0;             // Pearson correlation of bytes with step; 0 if either is constant
  double growth_bytes = 0;  // slope * (x_last - x_first) over the fit window
  double tail_slope = 0;    // slope over the tail (0 when not computed)
};

// Number of leading samples excluded from a series of `samples` samples.
size_t growth_warmup_steps(size_t samples, const GrowthOptions &opts);
// The fewest step samples that leave min_fit_steps after the warm-up: a
// shorter run can list what it holds but never call it growth.
size_t min_samples_for_growth(const GrowthOptions &opts);

// The pure core: live bytes at consecutive step boundaries (x = 0, 1, 2...).
GrowthFit fit_series(const std::vector<double> &bytes, const GrowthOptions &opts);

// Same, with explicit step numbers (strictly increasing, same length as
// `bytes`), for sample series that skip steps. The slope stays bytes per
// step; warm-up and minimum lengths count samples.
GrowthFit fit_series(const std::vector<double> &steps, const std::vector<double> &bytes,
                     const GrowthOptions &opts);

// Merges the raw sites of `in.steps` that symbolize to the same source site
// (the leak grouping's key: trimmed native frames + Python frames, plus api
// and family), fits each merged series and returns the flagged ones, bytes
// per step descending. A site absent from a step sample has 0 bytes there.
std::vector<GrowthEntry> detect_growth(const AnalysisInput &in, Symbolizer &symbolizer,
                                       const GrowthOptions &opts = {});

}  // namespace torchseal
