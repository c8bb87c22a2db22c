// Data of the page's interactive timeline (docs/report-format.md, "HTML
// report"): every allocation's lifetime, recorded during the timeline's one
// replay, reduced for the page to
//  * the largest allocations as bands (stacked like PyTorch memory_viz's
//    Active Memory Timeline), each with its stack, Python first, and holder;
//  * everything else as one aggregate of live bytes per time bucket;
//  * live bytes per site per time bucket, for the live-memory flame graph at
//    any moment and the growth chart per site;
//  * the step boundaries (step marks, NVTX steps, else time windows) the
//    x axis is laid out in.
// The level of detail is fixed by counts, not by the history's length, so a
// 1M-event history gives a page of the same order as a small one.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model/analysis_input.h"
#include "report/model/report_model.h"

namespace torchseal {

struct BandAlloc : LiveAlloc {
  uint64_t t0 = 0, t1 = 0;  // alloc and release time (ns); t1 = 0: live at the end
};

struct BandMoment {
  uint64_t time_ns = 0;
  std::string what;  // "OOM: 2.0 GiB requested", "dump", "mark NAME"
  char kind = 'm';   // 'o' OOM, 'd' dump, 'm' mark, 't' teardown
};

// Filled by the timeline's replay (html_timeline.cpp forwards to it).
struct BandHistory {
  std::vector<BandAlloc> allocs;
  std::vector<std::pair<uint64_t, uint64_t>> steps, windows;  // (time, step number)
  std::vector<BandMoment> moments;
  std::vector<Module> modules;
  std::unordered_map<StackId, std::vector<uint64_t>> stacks;
  std::unordered_map<PyStackId, std::vector<PyFrame>> pystacks;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> symbols;  // carried by the file
  uint64_t t0 = 0, t_end = 0;
  bool python = false;  // the process ran a Python interpreter
};

struct BandLimits {
  size_t bands = 1500;    // allocations drawn one by one
  size_t buckets = 1000;  // time buckets of the aggregate and the site series
  size_t sites = 100;     // sites with their own live-bytes series
  size_t steps = 4000;    // step boundaries kept for the axis (thinned evenly)
};

// The page's data as JSON, safe inside <script type="application/json">
// ('<', '>' and '&' escaped). `report` supplies holders and hints per site.
std::string bands_json(BandHistory &h, const Report &report, const BandLimits &limits = {});

}  // namespace torchseal
