// What a replay has accumulated from the start of a history up to one point:
// the lists the analysis reads at the end (step samples, OOMs, marks, invalid
// frees, teardown leaks) and the running totals. A checkpoint stores it, so a
// reader that starts at a later segment of a capped history (the earlier
// ones dropped) ends with exactly what a reader of the whole history has.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model/analysis_input.h"

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

// The bounds on the lists, and the one way each grows: the replay's
// accumulation and a capped history's checkpoints (which store what was added
// since a base, common/format/checkpoint.h) both go through these, so a
// reader that adds a checkpoint's additions to its base ends where the writer
// was.
inline constexpr size_t kMaxMarks = 10000;  // a report lists them all: keep it readable
// The shim keeps at most 8 undecided or seen OOMs and 8 recovered ones
// (shim/core/recorder.cpp): the first 16 with their live set cover them
// unless a run retried often, and the newest 8 the OOM the program saw.
inline constexpr size_t kSnapshotFirst = 16, kSnapshotLast = 8;
inline constexpr size_t kMaxOoms = 4096;
inline constexpr size_t kMaxStepSamples = 4096;

// Appends a step sample; a full list first drops every other sample
// (returns true then).
bool push_step_sample(std::vector<StepSample> &v, StepSample &&s);
// Appends an OOM: past kMaxOoms the oldest after the first kSnapshotFirst
// goes; only the first kSnapshotFirst and the newest kSnapshotLast keep their
// live-set snapshot.
void push_oom(std::vector<OomRecord> &v, OomRecord &&o);
// Whether the OOM at `i` of `n` keeps its snapshot (push_oom's rule).
inline bool keeps_snapshot(size_t i, size_t n) {
  return i < kSnapshotFirst || i + kSnapshotLast >= n;
}
// The samples of a list of `base` samples still there after `halvings`
// halvings: indices 0, 2^h, 2*2^h, ... (push_step_sample keeps even indices).
size_t surviving_base_samples(size_t base, uint64_t halvings);

}  // namespace torchseal
