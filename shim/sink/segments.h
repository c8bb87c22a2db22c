// A capped history (TORCHSEAL_HISTORY_LIMIT, docs/long-runs.md): the events
// go to segment files P.tseal.000001, ... and the main file P.tseal keeps
// what they refer to (stacks, labels, modules), the segment index and the
// end. When the files outgrow the cap the oldest segments are deleted,
// except around OOMs, dumps and marks and the first steps, while the most
// recent stay.
//
// Dropping detail must not change a verdict, so every segment starts with a
// checkpoint: the live allocations, VMM mappings and the run's summary so
// far (step samples per site, OOMs, marks). The writer keeps that state from
// the events as it writes them, with the rules every reader's replay keeps
// (common/live): it never reads back what it wrote. A reader that starts at
// any kept segment ends where a reader of the whole run ends.
//
// Service thread only, like the pass writer that calls it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/format/records.h"
#include "shim/core/thread_buffers.h"

namespace torchseal::history::segments {

using WriteFn = void (*)(const std::vector<uint8_t> &);
using ErrorFn = void (*)(int err);

// Starts segment 1. The main file begins with `main_bytes` (header, Process
// chunk, whose `clock_base` dates the marks); `write_main` appends to the
// main file; `on_error` gets the errno of a failed segment write (the
// history is then off for good).
void begin(const std::string &path, uint64_t limit, uint64_t main_bytes, double clock_base,
           WriteFn write_main, ErrorFn on_error);
bool active();

// One pass: `meta` (modules, stacks, and the mark labels new in it,
// `labels`) to the main file; the sealed thread buffers' events are ordered
// by time, applied to the checkpoint state and written to the current
// segment in slices, and a new segment begins whenever one reaches the
// segment size.
void write_pass(const std::vector<uint8_t> &meta, const tseal::LabelsRecord &labels,
                const std::vector<buffers::Sealed> &chunks);

// Closes the current segment (its index entry goes to the main file).
void finish();

// Child side of fork: the parent's files are not ours.
void reset_after_fork();

}  // namespace torchseal::history::segments
