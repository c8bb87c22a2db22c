// The report as written to P.json (docs/report-format.md). It is the exchange
// format between analyze(), the JSON/text writers and the JSON reader, so it
// holds the report spelling (strings) rather than enums: a report read back
// from disk round-trips exactly, whatever produced it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/model/frames.h"
#include "common/model/history_window.h"

namespace torchseal {

using PythonFrame = PyFrame;

// A likely cause and fix for a growing site or an OOM (docs/report-format.md, "hint").
// file and line name the statement that keeps the memory alive (the
// `append`, the `+=`, the `except`), not the allocation.
struct Hint {
  std::string kind;     // the rule that matched, e.g. "loss-accumulation"
  std::string message;  // one line
  std::string file;     // empty = unknown (JSON null)
  int line = 0;         // 0 = unknown (JSON null)
  bool operator==(const Hint &) const = default;
};

struct Overhead {
  uint64_t events = 0;
  double seconds_in_torchseal = 0;
};

struct Summary {
  uint64_t leaked_bytes = 0;
  uint64_t leaked_allocations = 0;
  uint64_t leak_sites = 0;
  uint64_t peak_bytes = 0;
  uint64_t events = 0;
  uint64_t suppressed_bytes = 0;
  uint64_t cached_bytes = 0;
  Overhead overhead;
  // Last, so brace-initialised Summaries keep their meaning.
  uint64_t reachable_bytes = 0;  // still held by Python objects at exit: not leaked
  // Interval reports (trigger "stop") and shims attached late only.
  uint64_t preexisting_frees = 0;
  uint64_t preexisting_freed_bytes = 0;
  // cached_bytes split by the holder scan (Python processes): inside live
  // tensors (also listed in `reachable`), and free.
  uint64_t cached_in_tensors_bytes = 0;
  uint64_t cached_free_bytes = 0;
  // Held by CUDA libraries for handles the framework owns (library_held).
  uint64_t library_held_bytes = 0;
};

struct LeakEntry {
  // family_name(): device | stream-ordered | managed | host-pinned | vmm | host-registered | graph
  std::string kind;
  std::string api;
  int device = -1;  // -1 = unknown (JSON null)
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  std::string detected_at = "exit";  // exit | context-teardown
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
  std::vector<Holder> holders;  // largest first
  std::string library;          // library_held entries only: "cuBLAS", "cuDNN", ...
  // vmm: the cuMemMap that still maps the handle (JSON `mapped_at`; empty
  // when nothing maps it).
  std::vector<NativeFrame> map_frames;
  std::vector<PythonFrame> map_python_frames;
};

// GrowthEntry::kind of a growing autograd graph (docs/holders.md).
inline constexpr const char *kGraphGrowthKind = "autograd-graph";

struct GrowthEntry {
  double bytes_per_step = 0;
  int64_t growth_bytes = 0;
  uint64_t steps = 0;
  double r = 0;
  std::string kind;
  std::string api;
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
  std::optional<Hint> hint;
  std::vector<Holder> holders;
  // kind "autograd-graph" only (docs/holders.md): the graph's nodes at the
  // last step scan, and how many it gained per step.
  uint64_t graph_nodes = 0;
  double graph_nodes_per_step = 0;
};

struct SiteTotal {
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
};

// Memory by role at one moment (docs/roles.md): every role, in Role order,
// zeros included; the bytes add up to live_bytes.
struct RoleShare {
  std::string name;  // "GPT": a top-level module's type
  uint64_t bytes = 0, tensors = 0;
};
struct RoleEntry {
  std::string role;  // role_name()
  uint64_t bytes = 0;
  uint64_t count = 0;  // tensors (scan roles), allocations (library_held, outside_framework)
  std::vector<RoleShare> modules;  // parameters ... optimizer_state: per top-level module
  std::vector<Holder> holders;     // user_held: the top holders
  std::vector<SiteTotal> sites;    // outside_framework: by site, largest first
};
struct RoleSplit {
  std::string at;     // step | dump | oom | exit
  uint64_t step = 0;  // 0: before the first step
  uint64_t live_bytes = 0;
  // Taken after an attach or an interval's start: the split also counts
  // memory from before tracking (docs/roles.md), and says so.
  bool before_tracking = false;
  // PyTorch's own counts at the scan (allocator_stats: it answered).
  bool allocator_stats = false;
  uint64_t torch_allocated = 0, torch_reserved = 0;
  std::vector<RoleEntry> roles;  // empty: no split (no holder scan ran)
};

struct OomEntry {
  std::string api;
  uint64_t requested_bytes = 0;
  int device = -1;
  uint64_t live_bytes = 0;
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
  std::vector<SiteTotal> top_sites;  // bytes descending
  std::optional<Hint> hint;
  bool recovered = false;  // the retry succeeded; no dump, not counted
  std::vector<Holder> holders;
  RoleSplit roles;  // at the first safe point after it
};

struct InvalidFreeEntry {
  std::string api;
  uint64_t address = 0;
  std::vector<NativeFrame> frames;
  std::vector<PythonFrame> python_frames;
};

// One row of the "Suppressions used" table: what a suppression pattern hid.
// Written to P.json as the extra key `suppressions_used` when non-empty.
struct SuppressionUse {
  std::string pattern;
  uint64_t allocations = 0;
  uint64_t bytes = 0;
};

// A snapshot (`torchseal attach --snapshot`, trigger "snapshot"): what
// Python objects hold now, memory allocated before the attach included
// (the holder scan's view, docs/report-format.md).
struct HeldNow {
  bool present = false;
  uint64_t bytes = 0;
  uint64_t tensors = 0;
  std::vector<Holder> holders;  // largest first
};

inline constexpr const char *kReportFormat = "torchseal-report";
inline constexpr int kReportVersion = 1;

struct Report {
  int version = kReportVersion;
  std::string trigger = "exit";  // exit | signal | oom | api | stop | snapshot
  ProcessInfo process;
  Summary summary;
  std::vector<LeakEntry> leaks;  // bytes descending
  // Python processes: memory live at exit that Python objects still hold
  // (docs/report-format.md); shaped like leaks, never counted as leaked.
  std::vector<LeakEntry> reachable;
  // Memory CUDA libraries keep for handles the framework owns for the
  // process's life (docs/report-format.md); shaped like leaks, not leaked.
  std::vector<LeakEntry> library_held;
  std::vector<GrowthEntry> growth;
  std::vector<OomEntry> ooms;
  std::vector<InvalidFreeEntry> invalid_frees;
  std::vector<SuppressionUse> suppressions_used;  // file order of first use
  std::vector<Mark> marks;                        // oldest first; from history files
  HeldNow held_now;                               // snapshots only
  HistoryReadInfo history;  // a report read from a history: what was read, which window
  // Memory by role (docs/roles.md): at this report's scan, at the scan with
  // the highest live total, and the step scans' totals (no modules or sites).
  RoleSplit roles, peak_roles;
  std::vector<RoleSplit> role_steps;
};

}  // namespace torchseal
