#include "report/analysis/graph_growth.h"

#include <cmath>
#include <string>

namespace torchseal {
namespace {

// Pearson correlation of nodes with step; 0 when either is constant.
double correlation(const std::vector<GraphSample> &s, size_t from) {
  const double n = static_cast<double>(s.size() - from);
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  for (size_t i = from; i < s.size(); ++i) {
    const double x = static_cast<double>(s[i].step), y = static_cast<double>(s[i].nodes);
    sx += x;
    sy += y;
    sxx += x * x;
    syy += y * y;
    sxy += x * y;
  }
  const double vx = n * sxx - sx * sx, vy = n * syy - sy * sy;
  return vx > 0 && vy > 0 ? (n * sxy - sx * sy) / std::sqrt(vx * vy) : 0;
}

}  // namespace

std::vector<GrowthEntry> graph_growth(const AnalysisInput &in, SiteIds &sites,
                                      const GraphGrowthOptions &opts) {
  std::vector<GrowthEntry> out;
  for (const GraphSeries &g : in.graph_series) {
    const std::vector<GraphSample> &s = g.samples;
    if (s.size() < opts.min_samples || g.chain.empty()) continue;
    // The run of strictly rising node counts that ends the series.
    size_t from = s.size() - 1;
    while (from > 0 && s[from - 1].nodes < s[from].nodes && s[from - 1].step < s[from].step) --from;
    const GraphSample &first = s[from], &last = s.back();
    if (s.size() - from < opts.min_samples || last.step - first.step < opts.min_span_steps)
      continue;
    const double span = static_cast<double>(last.step - first.step);
    const double per_step = static_cast<double>(last.nodes - first.nodes) / span;
    if (per_step < opts.min_nodes_per_step) continue;
    GrowthEntry e;
    e.kind = kGraphGrowthKind;
    e.graph_nodes = last.nodes;
    e.graph_nodes_per_step = per_step;
    e.steps = s.size() - from;
    e.r = correlation(s, from);
    e.growth_bytes = static_cast<int64_t>(last.bytes) - static_cast<int64_t>(first.bytes);
    e.bytes_per_step = static_cast<double>(e.growth_bytes) / span;
    if (g.stack || g.pystack) {
      e.frames = sites.native_frames(g.stack);
      e.python_frames = sites.python_frames(g.pystack);
    }
    Holder h;
    h.chain = g.chain;
    h.chain.push_back("autograd graph of " + std::to_string(last.nodes) + " nodes");
    h.bytes = last.bytes;
    h.tensors = 1;
    e.holders.push_back(std::move(h));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace torchseal
