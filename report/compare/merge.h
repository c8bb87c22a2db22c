// `torchseal merge`: one report for a job made of several processes (DDP
// ranks, DataLoader workers, forked children). Identical sites (site_match.h,
// plus device and detected_at for leaks) become one entry whose bytes and
// allocations are the sums; each entry remembers its per-rank shares, and a
// site that is not the same on every input is flagged non-uniform: the usual
// sign of a rank-specific bug.
//
// Rank labels: process.rank ("2"); when one rank has several processes in
// the input (its workers inherit RANK), "2/pid:4711"; with no rank, "pid:4711".
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

struct RankShare {
  uint64_t bytes = 0;         // leak: leaked bytes; growth: growth_bytes (>= 0)
  uint64_t allocations = 0;   // leak only
  double bytes_per_step = 0;  // growth only
};

struct MergedReport {
  Report report;                                               // keeps the P.json schema
  std::vector<std::string> labels;                             // per input, in input order
  std::vector<std::map<std::string, RankShare>> leak_ranks;    // parallel to report.leaks
  std::vector<std::map<std::string, RankShare>> growth_ranks;  // parallel to report.growth
  std::vector<bool> leak_uniform, growth_uniform;
};

MergedReport merge_reports(const std::vector<Report> &inputs);

// report_to_json() plus, per leak/growth entry, "ranks": {label: {...}} and
// "uniform", and a top-level "merged_from" list. Extra keys only.
std::string merged_to_json(const MergedReport &m);

// Human summary: inputs, and one line per non-uniform site.
std::string merged_notes(const MergedReport &m);

}  // namespace torchseal
