// The allocator-event history's hot side: per-thread buffers filled on every
// event, cut into sealed chunks for one pass of the writer. An allocating
// thread never touches the disk: a full buffer is handed to the pass queue
// and the thread carries on with a fresh one.
//
// This is the only sink header the core includes (with mark_labels.h): the
// core pushes events down, nothing here calls back up.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "common/model/event.h"

namespace torchseal::history {

// Whether events go to a file (asked on every event). Set and cleared by the
// pass writer, which owns the file.
extern std::atomic<bool> g_file_ok;
inline bool enabled() { return g_file_ok.load(std::memory_order_relaxed); }

// Hot path: encode one event into this thread's buffer.
void append(const Event &e);

// Wakes the service thread to write a dump report with this trigger.
// Async-signal-safe (a write to an eventfd and an atomic store).
void request_dump(const char *trigger);

namespace buffers {

// Event bytes: grown without zero-filling, so an append can reserve room
// for the largest event, encode in place, and trim to what was written.
template <typename T>
struct NoInitAllocator : std::allocator<T> {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <typename U>
  NoInitAllocator(const NoInitAllocator<U> &) noexcept {}
  template <typename U>
  void construct(U *p) noexcept {
    ::new (static_cast<void *>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U *p, Args &&...args) {
    ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...);
  }
};
using EventBytes = std::vector<uint8_t, NoInitAllocator<uint8_t>>;

// One thread's events, encoded relative to `base_time`.
struct Sealed {
  uint32_t tid;
  uint64_t base_time;
  uint32_t count;
  EventBytes bytes;
};

// Creates the doorbell (the eventfd the service thread waits on) and the
// fence, once the service thread is about to start.
void init();
int doorbell();
// Rings the doorbell. Async-signal-safe.
void ring();

// Whether append() records at all: on while the service thread runs.
void set_accepting(bool on);

// Called on the writer thread: it never waits for itself when the backlog
// of sealed buffers is full.
void set_writer_thread();

// Takes the dump request (0 none, 1 signal, 2 api, 3 oom).
int take_dump_request();

// Every buffer sealed at one cut across threads, after the full buffers
// handed over since the last cut; forgets the buffers of exited threads.
// Empty, with everything kept for the next cut, while a thread stays inside
// an append past a short wait (up to a few cuts in a row; never when
// `final`: the process is ending).
std::vector<Sealed> cut(bool final = false);

// The writer is done with these chunks: their buffers become the next ones
// threads fill (a few are kept; the rest are freed).
void recycle(std::vector<Sealed> &&chunks);

// Child side of fork: keep only this thread's (emptied) buffer, close the
// doorbell, stop accepting.
void reset_after_fork();

}  // namespace buffers
}  // namespace torchseal::history
