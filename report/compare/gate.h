// The CI verdict of `torchseal check` (and `run --fail-on-leak`) for one
// report: which leak and growth sites count against the limits, and why the
// report fails. Formatting lives in the CLI; this is the policy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "report/compare/baseline.h"
#include "report/model/report_model.h"

namespace torchseal {

struct GateLimits {
  // Total leaked bytes allowed (after suppressions and baseline). Unset
  // means 0: like LSan, any leak fails.
  std::optional<uint64_t> max_leaked_bytes;
  // Total bytes/step of the flagged growth sites allowed. Unset means 0:
  // any flagged growth site fails (the analysis only flags steady growth).
  std::optional<double> max_growth_bytes_per_step;
  // Fail a report whose process ran without a component (process.degraded):
  // a gate that relies on exact stacks or file:line matches in its
  // suppressions and baseline should not pass on a report that has neither.
  bool fail_on_degraded = false;
  // A known leak site still counts when it leaks more than this many times
  // the bytes its baseline recorded. Unset: a known site never counts, and
  // one that leaks more than recorded is only noted (known_grown).
  std::optional<double> baseline_max_ratio;
};

// A known leak site leaking more than its baseline recorded.
struct KnownGrown {
  size_t leak;              // index into Report::leaks
  uint64_t baseline_bytes;  // what the baseline recorded for its site
};

struct GateVerdict {
  bool pass = true;
  uint64_t counted_leaked_bytes = 0;  // leaks not excused by the baseline
  uint64_t counted_leaked_allocations = 0;
  double counted_growth_bytes_per_step = 0;
  size_t excused_leak_sites = 0;  // covered by the baseline
  size_t excused_growth_sites = 0;
  std::vector<size_t> leak_offenders;    // indices into Report::leaks, bytes descending
  std::vector<size_t> growth_offenders;  // indices into Report::growth, rate descending
  std::vector<size_t> graph_offenders;   // ... its growing autograd graphs (no limit)
  // Known sites over the baseline's bytes, most grown first: over the ratio
  // they fail (baseline_exceeded); otherwise they are notes (known_grown).
  std::vector<KnownGrown> baseline_exceeded, known_grown;
  std::vector<std::string> reasons;      // one line each, empty when passing
};

// `baseline` may be null. The report's own suppressions are already applied.
GateVerdict evaluate_gate(const Report &r, const GateLimits &limits, const Baseline *baseline);

}  // namespace torchseal
