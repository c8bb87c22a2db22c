// The allocator-event history (P.tseal): per-thread buffers filled on the hot
// path, drained by one writer thread every flush interval. An allocating
// thread never touches the disk: a full buffer is handed to the writer's
// queue and the thread carries on with a fresh one.
//
// The writer thread also serves as the watcher for on-demand dumps: signal
// handlers and the OOM path only poke its eventfd.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "report/model/event.h"

namespace torchseal::history {

// Opens `path` (O_EXCL|O_NOFOLLOW, 0600) and starts the writer thread.
// On failure logs one line and leaves history off; recording goes on.
bool start(const std::string &path);
// Whether events go to a file (asked on every event).
extern std::atomic<bool> g_file_ok;
inline bool enabled() { return g_file_ok.load(std::memory_order_relaxed); }

// Time-window step boundaries every `seconds` while the program marks no
// steps of its own (0 disables).
void set_window_seconds(double seconds);

// Hot path: encode one event into this thread's buffer.
void append(const Event &e);

// Interns a mark label (torchseal_mark) for Mark events: the id their
// `size` carries; the writer defines it in the file before the event. 0 when
// the label cannot be kept (too many distinct labels): drop the mark then.
// Any thread; takes a lock, so not for the allocation path.
uint32_t intern_label(const char *label);

// Wakes the writer thread to write a dump report with this trigger.
// Async-signal-safe (a write to an eventfd and an atomic store).
void request_dump(const char *trigger);

// From a fatal-signal handler (async-signal-safe: eventfd write + poll): asks
// the writer thread to drain every buffer and mark the file as not cleanly
// ended, waiting at most `timeout_ms`. A crash inside the shim's own locks
// only costs the wait, never a hang.
void crash_flush(int timeout_ms);

// Final drain, symbol table and End chunk; joins the writer. Idempotent.
void finish(bool clean);

// Child side of fork: drop the parent's file and buffers; no thread exists.
void reset_after_fork();

constexpr uint64_t kFlushIntervalMs = 50;

}  // namespace torchseal::history
