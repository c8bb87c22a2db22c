// What a replay has accumulated from the start of a history up to one point:
// the lists the analysis reads at the end (step samples, OOMs, marks, invalid
// frees, teardown leaks) and the running totals. A checkpoint stores it, so a
// reader that starts at a later segment of a capped history (the earlier
// ones dropped) ends with exactly what a reader of the whole history has.
#pragma once

#include <cstdint>
#include <vector>

#include "report/model/analysis_input.h"

namespace torchseal {

struct RunSummary {
  uint64_t events = 0;  // alloc + free events incl. OOMs and invalid frees
  uint64_t peak = 0;    // the most live bytes after any allocation
  std::vector<InvalidFree> invalid_frees;
  std::vector<OomRecord> ooms;  // every OomFail event, oldest first (bounded)
  std::vector<Mark> marks;
  std::vector<LiveAlloc> teardown;         // allocations a teardown ended
  std::vector<StepSample> steps, windows;  // explicit steps, time windows (thinned)
};

}  // namespace torchseal
