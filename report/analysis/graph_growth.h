// Growing autograd graphs (docs/holders.md, "Growing autograd graphs"): a
// tensor that keeps adding to its graph step after step, the loss summed
// with its graph (`total_loss += loss`). With `backward()` every step its
// GPU memory hardly grows (a 4-byte scalar), so no site's bytes show it;
// the step scans count the graph's nodes instead.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model/analysis_input.h"
#include "report/analysis/site.h"
#include "report/model/report_model.h"

namespace torchseal {

struct GraphGrowthOptions {
  // Samples (step scans that found the graph) in the increasing run that
  // ends the series, and the steps they must span: a graph whose size
  // varies with the data (sequence lengths) rises three scans in a row now
  // and then; four rises over four steps are a trend.
  size_t min_samples = 4;
  uint64_t min_span_steps = 4;
  // Nodes added per step, on average over that run: a summed loss adds its
  // whole graph (at least the AddBackward0 node) every step.
  double min_nodes_per_step = 1;
};

// The series of `in.graph_series` that grew at every scan of their last
// `min_samples` or more, as growth entries of kind "autograd-graph": the
// owner's chain as the holder, the owner tensor's allocation as the site
// where known, `graph_nodes` and `graph_nodes_per_step`, and the GPU bytes
// the graph keeps as bytes_per_step / growth_bytes.
std::vector<GrowthEntry> graph_growth(const AnalysisInput &in, SiteIds &sites,
                                      const GraphGrowthOptions &opts = {});

}  // namespace torchseal
