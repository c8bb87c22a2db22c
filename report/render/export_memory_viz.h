// `torchseal export --memory-viz`: a .tseal history as a PyTorch memory
// snapshot (the pickle that pytorch.org/memory_viz and torch/cuda/_memory_viz.py
// open). The viewer's unpickler limits are in pickle_writer.h; the
// mapping chosen here:
//
//   * Each allocation is one segment holding one block of its full size:
//     `segment_alloc` then `alloc`. Each free is `free_requested`,
//     `free_completed`, `segment_free`. The final `segments` hold every
//     allocation live at the end of the window, one `active_allocated` block
//     each. A driver-level tool has no caching allocator between the user and
//     cudaMalloc, so "segment" and "block" coincide.
//   * Families: device, stream-ordered and managed allocations appear at their
//     own addresses. VMM physical allocations (cuMemCreate / cuMemRelease)
//     appear as segments too, but a handle has no address, so each gets a
//     synthetic one from a bump allocator at [2^52, 2^53): above every real
//     device virtual address, still exact as a JavaScript Number. VMM
//     map/unmap/reserve are not shown. Host-pinned memory is excluded: the
//     viewer is about device memory, and pinned host buffers mixed into a
//     device's timeline would misstate its usage.
//   * An allocation on an unknown device (-1) is shown on device 0.
//   * A context/device teardown frees what it destroys (free triples at the
//     teardown's time); an OOM is an `oom` entry with the requested size and
//     `device_free` 0 (free device memory is not recorded).
//   * Frames: the allocation's native stack, symbolized, inlined levels
//     expanded, trimmed so frames[0] is the user's call site (site.h), then
//     its Python frames from the file's PyStacks chunks (innermost first).
//     The history records no stack for
//     frees, so free entries carry the freed allocation's frames: selecting
//     a free in the viewer then shows what was freed.
//
// Windowing (--since/--until/--max-entries) keeps the snapshot consistent:
// the final `segments` are the live state at the end of the window, and the
// trace is the entries inside it. Frees of allocations made before the
// window stay in the trace: the viewer replays backwards from `segments`, so
// such an allocation is simply live at the start of the trace (MemoryViz
// shows it as "initially allocated"). --max-entries keeps the newest entries
// but never splits one event's entries (an allocation's segment_alloc and
// alloc, say), so the kept count may be slightly under N.
//
// Memory is bounded by the live allocations, the distinct stacks and symbols,
// never by the number of events: the history is read twice (once to collect
// stacks, symbols and counts, once to write), and trace entries go to one
// temporary spool file per device, copied into place at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/model/history_window.h"

namespace torchseal {

// A --since/--until value: seconds from process start, or absolute unix
// seconds when it is at least kEpochThreshold (no process runs for 30 years;
// no timestamp we will see is before 2001).
struct TimeBound {
  static constexpr double kEpochThreshold = 1e9;
  bool set = false;
  double value = 0;
  // Unix seconds this bound denotes for a process started at `start_unix`.
  double resolve(double start_unix) const {
    return value >= kEpochThreshold ? value : start_unix + value;
  }
};

struct MemoryVizOptions {
  int device = -1;           // only this device (-1 = all)
  TimeBound since, until;    // window of trace entries; segments = state at `until`
  uint64_t max_entries = 0;  // keep at most the newest N trace entries (0 = all)
  HistoryWindow window;      // only this part of the run is read
  // Progress over the whole export (both passes): done and total bytes of
  // history read. May be empty.
  std::function<void(uint64_t, uint64_t)> progress;
};

struct ExportStats {
  uint64_t events = 0;    // history events read (one pass)
  uint64_t entries = 0;   // trace entries / trace events written
  uint64_t segments = 0;  // memory-viz: final segments
  int devices = 0;        // memory-viz: lists in device_traces
  uint64_t bytes = 0;     // output file size
};

// Writes `out_path`. False with a one-line `error` if the history is unusable
// or the output cannot be written; `warnings` gets the reader's warnings
// (truncated history) and anything dropped.
bool export_memory_viz(const std::string &history_path, const std::string &out_path,
                       const MemoryVizOptions &opts, ExportStats &stats, std::string &error,
                       std::vector<std::string> &warnings);

}  // namespace torchseal
