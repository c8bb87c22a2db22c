// The shim's service thread: every flush interval it settles the OOMs
// nothing retried, steps time windows, and runs one history pass; it writes
// the dump reports that signal handlers and the OOM path ask for (they only
// ring the sink's doorbell, an eventfd) and, on a fatal signal, the crash End
// chunk. It sits above the core and the sink: it is what calls the recorder
// for them.
#pragma once

#include <string>

namespace torchseal::history {

// Opens `path` (empty: no history file, the thread still serves dumps) and
// starts the thread. On failure logs one line; recording goes on.
bool start(const std::string &path);

// The most bytes of history on disk (0: no cap), before start().
void set_limit(uint64_t bytes);

// Time-window step boundaries every `seconds` while the program marks no
// steps of its own (0 disables).
void set_window_seconds(double seconds);

// From a fatal-signal handler (async-signal-safe: eventfd write + poll): asks
// the service thread to drain every buffer and mark the file as not cleanly
// ended, waiting at most `timeout_ms`. A crash inside the shim's own locks
// only costs the wait, never a hang.
void crash_flush(int timeout_ms);

// Final drain, symbol table and End chunk; joins the thread. Idempotent.
void finish(bool clean);

// Child side of fork: drop the parent's file and buffers; no thread exists.
void reset_after_fork();

}  // namespace torchseal::history
