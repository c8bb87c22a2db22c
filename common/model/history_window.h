// A part of a history to read (docs/long-runs.md), and what reading a
// history cost, for the report to say. Model types: the CLI fills the first,
// the reader the second, and the writers print both.
#pragma once

#include <cstdint>

namespace torchseal {

// Seconds since the process started, or a step range; unset ends are open.
struct HistoryWindow {
  bool by_time = false, by_steps = false;
  double from_s = 0, to_s = -1;         // to_s < 0: to the end
  uint64_t from_step = 0, to_step = 0;  // steps A..B, both included; 0 = open
  bool any() const { return by_time || by_steps; }
};

struct HistoryReadInfo {
  bool present = false;  // the report comes from a history file
  // Segmented (capped) histories; 0 for a single file.
  uint64_t segments = 0;                        // the index lists (written)
  uint64_t segments_on_disk = 0;                // not dropped
  uint64_t segments_read = 0;                   // opened for this report
  uint64_t bytes_read = 0;                      // of every file opened
  uint64_t segment_bytes = 0, limit_bytes = 0;  // the writer's settings
  // The base checkpoint the last segment starts from (the live set and the
  // run's summary there), and whether the cap could not hold it with the main
  // file and one segment (the writer went over the cap rather than lose it).
  uint64_t checkpoint_bytes = 0;
  bool over_cap = false;
  // No clean end (the process crashed or was killed) or a damaged file: the
  // report is of the last event read, and all that was live then counts.
  bool truncated = false;
  // A window: its bounds as replayed, seconds since the process started
  // (from_s < 0 when it never opened: no event in it).
  bool windowed = false;
  double from_s = 0, to_s = 0;
  uint64_t from_step = 0, to_step = 0;  // as asked (steps windows)
};

}  // namespace torchseal
