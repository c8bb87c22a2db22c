// A capped history (TORCHSEAL_HISTORY_LIMIT, docs/long-runs.md): the events
// go to segment files P.tseal.000001, ... and the main file P.tseal keeps
// what they refer to (stacks, labels, modules), the segment index and the
// end. When the files outgrow the cap the oldest segments are deleted,
// except around OOMs, dumps and marks and the first steps, while the most
// recent stay.
//
// Dropping detail must not change a verdict, so this writer replays its own
// output as it goes (report/replay, the reader's code) and starts every
// segment with a checkpoint: the live allocations, VMM mappings and the
// run's summary so far (step samples per site, OOMs, marks). A reader that
// starts at any kept segment ends where a reader of the whole run ends.
//
// Service thread only, like the pass writer that calls it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "shim/core/thread_buffers.h"

namespace torchseal::history::segments {

using WriteFn = void (*)(const std::vector<uint8_t> &);
using ErrorFn = void (*)(int err);

// Starts segment 1. `main_head` is what the main file begins with (header,
// Process chunk), for the replay; `write_main` appends to the main file;
// `on_error` gets the errno of a failed segment write (the history is then
// off for good).
void begin(const std::string &path, uint64_t limit, const std::vector<uint8_t> &main_head,
           WriteFn write_main, ErrorFn on_error);
bool active();

// One pass: `meta` (modules, stacks, labels) to the main file; the sealed
// thread buffers are ordered, replayed and written to the current segment in
// slices, and a new segment begins whenever one reaches the segment size.
void write_pass(const std::vector<uint8_t> &meta, const std::vector<buffers::Sealed> &chunks);

// Closes the current segment (its index entry goes to the main file).
void finish();

// Child side of fork: the parent's files are not ours.
void reset_after_fork();

}  // namespace torchseal::history::segments
