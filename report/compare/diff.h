// `torchseal diff A B`: what changed between two runs, site by site.
// Sites are matched as in site_match.h (symbolized frames, small line
// shifts tolerated), per (kind, api, device) for leaks and per (kind, api)
// for growth, so two builds of one program compare cleanly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

enum class DiffStatus { New, Gone, Grown, Shrunk, Same };
const char *diff_status_name(DiffStatus s);

struct LeakDelta {
  DiffStatus status = DiffStatus::Same;
  std::string kind, api;
  int device = -1;
  uint64_t bytes_a = 0, bytes_b = 0, allocations_a = 0, allocations_b = 0;
  std::vector<NativeFrame> frames;  // from B when present, else from A
  std::vector<PythonFrame> python_frames;
};

struct GrowthDelta {
  DiffStatus status = DiffStatus::Same;
  std::string kind, api;
  double bytes_per_step_a = 0, bytes_per_step_b = 0;
  int64_t growth_bytes_a = 0, growth_bytes_b = 0;
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
};

struct ReportDiff {
  std::string path_a, path_b;
  uint64_t leaked_bytes_a = 0, leaked_bytes_b = 0;
  uint64_t leak_sites_a = 0, leak_sites_b = 0;
  std::vector<LeakDelta> leaks;     // changed sites only; new, grown, shrunk, gone
  std::vector<GrowthDelta> growth;  // changed sites only
  size_t unchanged_leak_sites = 0, unchanged_growth_sites = 0;
};

ReportDiff diff_reports(const Report &a, const Report &b);
std::string diff_to_text(const ReportDiff &d);
std::string diff_to_json(const ReportDiff &d);

}  // namespace torchseal
