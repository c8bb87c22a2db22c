// The one analysis: live state (from the shim at exit, or a replayed history
// file) -> Report. Both paths call analyze() so they agree on the leak set.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/symbols/symbolizer.h"
#include "report/analysis/growth.h"
#include "report/model/report_model.h"

namespace torchseal {

struct AnalysisOptions {
  GrowthOptions growth;  // docs/pytorch.md thresholds (CLI-settable)
  size_t oom_top_sites = 10;
  // Memory CUDA libraries hold for the framework's handles goes to
  // library_held (library_held.h); false folds it back into leaks
  // (TORCHSEAL_LIBRARY_HELD=off).
  bool library_held = true;
  // Suppressions plug in here: called once per leak site with its trimmed,
  // symbolized frames. A suppressed site is left out of `leaks` and its bytes
  // go to summary.suppressed_bytes.
  std::function<bool(const std::vector<NativeFrame> &, const std::vector<PythonFrame> &)>
      is_suppressed;
  // Same, naming the pattern that matched (nullptr = not suppressed), so the
  // report can say which suppression hid what ("Suppressions used"). Takes
  // precedence over is_suppressed for leaks. See suppressions.h.
  std::function<const std::string *(const std::vector<NativeFrame> &,
                                    const std::vector<PythonFrame> &)>
      match_suppression;
};

// In a process using PyTorch's caching allocator (segments mode), memory it
// still holds at exit is cache, not a leak: cudaMalloc-family device memory,
// VMM handles (expandable_segments) and cudaHostAlloc pinned memory (its
// host allocator); the verdict there comes from growth. Only exit-time
// liveness is excused; an allocation still live when its context was torn
// down is lost for real (the cache can never free it) and stays a leak.
bool counts_as_cached(const AnalysisInput &in, const LiveAlloc &a);

Report analyze(const AnalysisInput &in, Symbolizer &symbolizer, const AnalysisOptions &opts = {});

}  // namespace torchseal
