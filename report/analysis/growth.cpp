#include "report/analysis/growth.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

#include "report/analysis/site.h"

namespace torchseal {
namespace {

struct LineFit {
  double slope = 0;
  double r = 0;
};

// Least squares of y on x over [lo, hi). Centred sums (two passes) so that
// byte counts in the 1e10 range do not lose the slope to cancellation.
LineFit fit_line(const std::vector<double> &x, const std::vector<double> &y, size_t lo, size_t hi) {
  LineFit f;
  const size_t n = hi - lo;
  if (n < 2) return f;
  double mx = 0, my = 0;
  for (size_t i = lo; i < hi; ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= double(n);
  my /= double(n);
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = lo; i < hi; ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxx += dx * dx;
    syy += dy * dy;
    sxy += dx * dy;
  }
  if (sxx <= 0) return f;
  f.slope = sxy / sxx;
  // A constant series has no correlation with anything: r = 0, so it can
  // never pass a tier (it is reported as NotGrowing before that anyway).
  if (syy > 0) f.r = std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
  return f;
}

bool strictly_increasing(const std::vector<double> &x) {
  for (size_t i = 1; i < x.size(); ++i) {
    if (!(x[i] > x[i - 1])) return false;
  }
  return true;
}

// A merged series: one source site with one API (and so one family), as in
// the leak grouping. Device is not part of SiteSample, so sites on several
// devices merge; the frames are what a user acts on.
struct SeriesKey {
  uint32_t site;
  uint16_t api;
  uint8_t family;
  bool operator==(const SeriesKey &) const = default;
};
struct SeriesKeyHash {
  size_t operator()(const SeriesKey &k) const {
    return std::hash<uint64_t>()((uint64_t(k.site) << 24) ^ (uint64_t(k.api) << 8) ^ k.family);
  }
};

struct Series {
  SeriesKey key;
  // Sparse (sample index, bytes), indices ascending: memory stays
  // proportional to the input however many steps and sites there are.
  std::vector<std::pair<size_t, double>> points;
};

}  // namespace

const char *growth_verdict_name(GrowthVerdict v) {
  switch (v) {
    case GrowthVerdict::Flagged:
      return "flagged";
    case GrowthVerdict::TooFewSteps:
      return "too few steps after warm-up";
    case GrowthVerdict::NotGrowing:
      return "not growing";
    case GrowthVerdict::BelowFloor:
      return "growth below floor";
    case GrowthVerdict::NotSteady:
      return "growth not steady (no slope/r tier met)";
    case GrowthVerdict::Plateaued:
      return "growth stopped in the last part of the run";
  }
  return "unknown";
}

size_t growth_warmup_steps(size_t samples, const GrowthOptions &opts) {
  const double frac = std::clamp(opts.warmup_fraction, 0.0, 1.0);
  const auto by_fraction = static_cast<size_t>(std::ceil(frac * double(samples)));
  return std::max(opts.warmup_min_steps, by_fraction);
}

size_t min_samples_for_growth(const GrowthOptions &opts) {
  size_t n = opts.min_fit_steps;
  // Bounded: a warm-up fraction of 1 leaves nothing at any length.
  while (n < (1u << 20) && n - std::min(n, growth_warmup_steps(n, opts)) < opts.min_fit_steps) ++n;
  return n;
}

GrowthFit fit_series(const std::vector<double> &bytes, const GrowthOptions &opts) {
  std::vector<double> x(bytes.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(i);
  return fit_series(x, bytes, opts);
}

GrowthFit fit_series(const std::vector<double> &steps_in, const std::vector<double> &bytes,
                     const GrowthOptions &opts) {
  // Mismatched or non-increasing step numbers cannot be trusted as x; the
  // sample order still is, so fall back to consecutive steps.
  const std::vector<double> *xs = &steps_in;
  std::vector<double> index;
  if (steps_in.size() != bytes.size() || !strictly_increasing(steps_in)) {
    index.resize(bytes.size());
    for (size_t i = 0; i < index.size(); ++i) index[i] = double(i);
    xs = &index;
  }
  const std::vector<double> &x = *xs;

  GrowthFit fit;
  const size_t n = bytes.size();
  fit.first = std::min(growth_warmup_steps(n, opts), n);
  fit.steps = n - fit.first;
  if (fit.steps < std::max<size_t>(opts.min_fit_steps, 2)) {
    fit.verdict = GrowthVerdict::TooFewSteps;
    return fit;
  }

  const LineFit all = fit_line(x, bytes, fit.first, n);
  fit.slope = all.slope;
  fit.r = all.r;
  fit.growth_bytes = all.slope * (x[n - 1] - x[fit.first]);
  // The fitted growth rather than last - first: one noisy endpoint (a
  // transient buffer live at the last boundary) must not decide the floor.
  if (!(all.slope > 0) || !(all.r > 0)) {
    fit.verdict = GrowthVerdict::NotGrowing;
    return fit;
  }
  if (!(fit.growth_bytes > opts.min_growth_bytes)) {
    fit.verdict = GrowthVerdict::BelowFloor;
    return fit;
  }
  const bool steady = std::any_of(opts.tiers.begin(), opts.tiers.end(), [&](const GrowthTier &t) {
    return fit.slope > t.min_slope && fit.r > t.min_r;
  });
  if (!steady) {
    fit.verdict = GrowthVerdict::NotSteady;
    return fit;
  }

  // Still growing at the end? A line through warm-up-then-plateau data has a
  // positive slope and often a fair r; what it lacks is growth in its last
  // part. Comparing against the overall slope (not just > 0) also rejects a
  // cache whose growth is dying away, and a site freed late in the run
  // (negative tail slope).
  const double frac = std::clamp(opts.tail_fraction, 0.0, 1.0);
  size_t tail =
      std::max(opts.tail_min_steps, static_cast<size_t>(std::ceil(frac * double(fit.steps))));
  tail = std::clamp<size_t>(tail, 2, fit.steps);
  fit.tail_slope = fit_line(x, bytes, n - tail, n).slope;
  if (!(fit.tail_slope > 0) || fit.tail_slope < opts.tail_slope_ratio * fit.slope) {
    fit.verdict = GrowthVerdict::Plateaued;
    return fit;
  }
  fit.verdict = GrowthVerdict::Flagged;
  fit.flagged = true;
  return fit;
}

std::vector<GrowthEntry> detect_growth(const AnalysisInput &in, Symbolizer &symbolizer,
                                       const GrowthOptions &opts) {
  std::vector<GrowthEntry> out;
  const size_t n = in.steps.size();
  const size_t first = std::min(growth_warmup_steps(n, opts), n);
  if (n - first < std::max<size_t>(opts.min_fit_steps, 2)) return out;

  // Only samples after warm-up enter a fit, so sites seen only during
  // warm-up are never symbolized. The numbering is the leak grouping's
  // (SiteIds, site.h), so a growth entry and a leak entry for one line of code
  // name the same site.
  SiteIds sites(in.stacks, symbolizer);
  std::unordered_map<SeriesKey, size_t, SeriesKeyHash> index;
  std::vector<Series> series;
  for (size_t i = first; i < n; ++i) {
    for (const SiteSample &s : in.steps[i].sites) {
      if (s.bytes == 0) continue;
      SeriesKey key{sites.get(s.stack, s.pystack), static_cast<uint16_t>(s.api),
                    static_cast<uint8_t>(s.family)};
      auto [it, fresh] = index.emplace(key, series.size());
      if (fresh) series.push_back({key, {}});
      auto &pts = series[it->second].points;
      // Raw sites of one source site at the same boundary add up.
      if (!pts.empty() && pts.back().first == i) {
        pts.back().second += double(s.bytes);
      } else {
        pts.emplace_back(i, double(s.bytes));
      }
    }
  }

  // Step numbers as x when they are usable (a producer may thin out samples
  // in a long run); fit_series falls back to indices otherwise.
  std::vector<double> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = double(in.steps[i].step);

  std::vector<double> y(n);
  for (const Series &s : series) {
    // Warm-up samples are zero here; fit_series skips them anyway.
    std::fill(y.begin(), y.end(), 0.0);
    for (const auto &[i, b] : s.points) y[i] = b;
    const GrowthFit fit = fit_series(x, y, opts);
    if (!fit.flagged) continue;
    const auto [stack, pystack] = sites.first_pair(s.key.site);
    GrowthEntry e;
    e.bytes_per_step = fit.slope;
    e.growth_bytes = static_cast<int64_t>(std::llround(fit.growth_bytes));
    e.steps = fit.steps;
    e.r = fit.r;
    e.kind = std::string(family_name(static_cast<Family>(s.key.family)));
    e.api = std::string(api_name(static_cast<ApiId>(s.key.api)));
    e.frames = sites.native_frames(stack);
    e.python_frames = sites.python_frames(pystack);
    out.push_back(std::move(e));
  }
  // Stable: equal rates keep first-seen order, so reports are reproducible.
  std::stable_sort(out.begin(), out.end(), [](const GrowthEntry &a, const GrowthEntry &b) {
    return a.bytes_per_step > b.bytes_per_step;
  });
  return out;
}

}  // namespace torchseal
