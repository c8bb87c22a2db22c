#include "report/compare/gate.h"

#include <algorithm>
#include <cstdio>

namespace torchseal {

GateVerdict evaluate_gate(const Report &r, const GateLimits &limits, const Baseline *baseline) {
  GateVerdict v;
  std::vector<long> leak_site(r.leaks.size(), -1);
  std::vector<bool> growth_known(r.growth.size(), false);
  if (baseline) {
    leak_site = baseline_matches(*baseline, r.leaks);
    growth_known = baseline_covers(*baseline, r.growth);
  }
  // The baseline records a site's largest entry (entries of one site on
  // several devices are separate), so each entry is compared with it, and
  // the site is named once, by its largest entry.
  std::vector<long> largest(baseline ? baseline->sites.size() : 0, -1);
  for (size_t i = 0; i < r.leaks.size(); ++i) {
    long s = leak_site[i];
    if (s >= 0 && (largest[size_t(s)] < 0 || r.leaks[i].bytes > r.leaks[size_t(largest[size_t(s)])].bytes))
      largest[size_t(s)] = long(i);
  }
  for (size_t i = 0; i < r.leaks.size(); ++i) {
    if (leak_site[i] >= 0) {
      // A baseline with no bytes (written by hand) says nothing about size.
      uint64_t recorded = baseline->sites[size_t(leak_site[i])].bytes;
      size_t site_entry = size_t(largest[size_t(leak_site[i])]);
      if (recorded > 0 && r.leaks[site_entry].bytes > recorded) {
        bool over = limits.baseline_max_ratio &&
                    double(r.leaks[site_entry].bytes) > *limits.baseline_max_ratio * double(recorded);
        if (site_entry == i) (over ? v.baseline_exceeded : v.known_grown).push_back({i, recorded});
        if (over) continue;
      }
      ++v.excused_leak_sites;
      continue;
    }
    v.counted_leaked_bytes += r.leaks[i].bytes;
    v.counted_leaked_allocations += r.leaks[i].allocations;
    v.leak_offenders.push_back(i);
  }
  for (size_t i = 0; i < r.growth.size(); ++i) {
    if (growth_known[i]) {
      ++v.excused_growth_sites;
      continue;
    }
    // A growing autograd graph fails the gate whatever its bytes.
    if (r.growth[i].kind == kGraphGrowthKind) {
      v.graph_offenders.push_back(i);
      continue;
    }
    // Shrinking or flat "growth" entries cannot fail a growth limit.
    if (r.growth[i].bytes_per_step <= 0) continue;
    v.counted_growth_bytes_per_step += r.growth[i].bytes_per_step;
    v.growth_offenders.push_back(i);
  }
  std::stable_sort(v.leak_offenders.begin(), v.leak_offenders.end(),
                   [&](size_t a, size_t b) { return r.leaks[a].bytes > r.leaks[b].bytes; });
  std::stable_sort(v.growth_offenders.begin(), v.growth_offenders.end(), [&](size_t a, size_t b) {
    return r.growth[a].bytes_per_step > r.growth[b].bytes_per_step;
  });
  auto by_ratio = [&](const KnownGrown &a, const KnownGrown &b) {
    return double(r.leaks[a.leak].bytes) / double(a.baseline_bytes) >
           double(r.leaks[b.leak].bytes) / double(b.baseline_bytes);
  };
  std::stable_sort(v.baseline_exceeded.begin(), v.baseline_exceeded.end(), by_ratio);
  std::stable_sort(v.known_grown.begin(), v.known_grown.end(), by_ratio);

  const std::string known = baseline ? " not in the baseline" : "";
  uint64_t max_leak = limits.max_leaked_bytes.value_or(0);
  if (v.counted_leaked_bytes > max_leak) {
    v.reasons.push_back(std::to_string(v.counted_leaked_bytes) + " byte(s) leaked in " +
                        std::to_string(v.counted_leaked_allocations) + " allocation(s) at " +
                        std::to_string(v.leak_offenders.size()) + " site(s)" + known + ", limit " +
                        std::to_string(max_leak));
  } else {
    v.leak_offenders.clear();  // within the limit: nothing to blame
  }
  double max_growth = limits.max_growth_bytes_per_step.value_or(0);
  if (v.counted_growth_bytes_per_step > max_growth) {
    char buf[160];
    std::snprintf(
        buf, sizeof buf, "%.1f byte(s)/step of steady growth at %zu site(s)%s, limit %.1f",
        v.counted_growth_bytes_per_step, v.growth_offenders.size(), known.c_str(), max_growth);
    v.reasons.push_back(buf);
  } else {
    v.growth_offenders.clear();
  }
  if (!v.baseline_exceeded.empty()) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%zu known site(s) leaked more than %g times their baseline bytes",
                  v.baseline_exceeded.size(), *limits.baseline_max_ratio);
    v.reasons.push_back(buf);
  }
  if (!v.graph_offenders.empty())
    v.reasons.push_back(std::to_string(v.graph_offenders.size()) +
                        " autograd graph(s) growing step after step" + known);
  if (limits.fail_on_degraded) {
    for (const std::string &d : r.process.degraded) v.reasons.push_back("degraded: " + d);
  }
  v.pass = v.reasons.empty();
  return v;
}

}  // namespace torchseal
