// The history file (P.tseal) and the pass that fills it: each pass cuts the
// thread buffers and writes what the events reference (modules, stacks,
// Python stacks, mark labels) before the events themselves. A write error
// turns the file off for good; recording goes on.
//
// Called from the service thread only (and from finish after it is joined).
// What the core owns comes in as parameters: the sink never calls the
// recorder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/model/analysis_input.h"  // ProcessInfo
#include "shim/core/stack_table.h"

namespace torchseal::history::file {

// Opens `path` (O_EXCL|O_NOFOLLOW, 0600) and writes the file header and the
// Process chunk. On failure logs one line and leaves history off. An error
// that will refuse the reports too (a full or read-only file system) calls
// `on_fs_refused` once; it returns false when the reports had already been
// refused (and said so), and then the history adds no line of its own.
// `limit` (TORCHSEAL_HISTORY_LIMIT, 0: none) caps the files on disk: the
// history is then segmented (segments.h).
void open(const std::string &path, const ProcessInfo &process, bool (*on_fs_refused)(),
          uint64_t limit = 0);

// One pass: drain every thread buffer and write it, after the modules and
// stacks new since the last pass. `final`: the process is ending (exit, a
// crash), so the cut waits for no thread (buffers::cut).
void pass(StackTable &stacks, bool final = false);

// Raw bytes after the passes (the symbol table at exit).
void write_all(const std::vector<uint8_t> &out);

// The End chunk. Encoded on the stack: no allocation, so it also works when
// a crash left the heap inconsistent.
void write_end(bool clean, uint8_t flags);

// Closes the file; history is off after it.
void close();

const std::string &path();

// Child side of fork: the parent's file is not ours; forget what it defined.
void reset_after_fork();

}  // namespace torchseal::history::file
