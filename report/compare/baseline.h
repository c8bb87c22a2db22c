// Leak baselines for CI: `torchseal baseline REPORT... -o B.json` records the
// leak (and growth) sites known today; `torchseal check --baseline B.json`
// then fails only on sites not in it. Sites are matched by symbolized frames
// (site_match.h), never by addresses, so a baseline survives rebuilds.
//
// File format (JSON):
//   { "format": "torchseal-baseline", "version": 1,
//     "sites": [ { "type": "leak"|"growth", "kind", "api", "bytes",
//                  "allocations", "frames": [{function,file,line,module}],
//                  "python_frames": [{function,file,line}] } ] }
// bytes/allocations are the largest seen. They are no limit unless the gate
// is given a ratio (`check --baseline-max-ratio R`); without one, a known
// site that leaks more than its bytes is noted, not failed.
#pragma once

#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

inline constexpr const char *kBaselineFormat = "torchseal-baseline";
inline constexpr int kBaselineVersion = 1;

struct BaselineSite {
  std::string type = "leak";  // leak | growth
  std::string kind, api;
  uint64_t bytes = 0, allocations = 0;
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
};

struct Baseline {
  std::vector<BaselineSite> sites;
};

// Every leak and growth site of every report, one entry per distinct site.
Baseline baseline_from_reports(const std::vector<Report> &reports);

std::string baseline_to_json(const Baseline &b);
bool baseline_from_json(const std::string &text, Baseline &out, std::string &error);
bool read_baseline_file(const std::string &path, Baseline &out, std::string &error);

// covered[i] is true when leaks[i] is a site of the baseline. Entries that
// are the same site (e.g. one per device) share one baseline site.
std::vector<bool> baseline_covers(const Baseline &b, const std::vector<LeakEntry> &leaks);
std::vector<bool> baseline_covers(const Baseline &b, const std::vector<GrowthEntry> &growth);
// The same matching, with the index into b.sites of each leak's site (-1: new).
std::vector<long> baseline_matches(const Baseline &b, const std::vector<LeakEntry> &leaks);

}  // namespace torchseal
