// When torchseal wakes up, how it survives fork, and how it ends.
//
// The constructor does nothing: a process that never calls CUDA (sh, a
// DataLoader worker, nvidia-smi) pays one relaxed load per hooked call and
// writes no files. The first CUDA call parses the configuration and arms the
// exit report; a bad setting leaves the shim inert with one line on stderr.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "shim/runtime/config.h"

namespace torchseal {

enum class ShimState : int { Uninit = 0, Active = 1, Disabled = 2, Finished = 3 };

// True when events should be recorded. Initialises on first use.
bool ensure_active();
// True when active, without initialising.
bool is_active();
// The settings; only while active.
const Config &config();
// The settings without activating (parsed on the first call); nullptr when a
// value is bad, which leaves the shim inert at its first CUDA call.
const Config *parsed_config();
const char *backend_name();
// How native stacks are walked (unwinder_init's answer); "" before activation.
const char *unwinder_name();

// The first recorded event of this process (a forked child's own first
// CUDA call): starts its history file. Backends call it before recording.
void note_first_record();

// The CUPTI backend gave its slot up: the hooks record from now on.
void hooks_take_over();

// CUDA has been initialised (a successful cuInit): from here on the process
// writes its report at exit, even an empty one, so "active, no leaks" can be
// told from "never active". Does nothing inside another hooked call (the
// hook that made it activates the shim itself).
void note_cuda_initialised();

// Marks the calling thread as torchseal's own (writer, watcher): hooked calls
// made on it are never recorded.
void mark_thread_internal();

// The shim was loaded after the CUDA libraries (torchseal.start(), or
// the driver's injection at cuInit).
bool loaded_late();
// `torchseal attach` loaded the shim with dlopen: it is late whatever was
// loaded before it (a process that has not loaded CUDA yet is patched as
// its libraries arrive).
void note_loaded_by_attach();
// `torchseal attach`'s final report: from the end of its holder scan on, no
// call is recorded (CUPTI unsubscribes, the hooks pass calls through), so
// the live allocations the report lists are those the scan saw; a tensor
// allocated after the scan is not taken for a leak. The state stays active
// for the report.
void pause_recording();
// `torchseal attach` ends: recording stops, the callers' GOT entries get
// their values back, CUPTI is released, the history ends and the writer
// thread is joined, the signal handlers are the program's again. The shim
// stays mapped (it is linked -z nodelete) and inert: its exit report is
// off. Returns the GOT entries restored. Call with the interval closed.
size_t detach();
// torchseal_start() is about to wake a late shim: the process allocated
// before it, so frees of unknown memory are pre-existing, and the callers'
// GOT entries are pointed at the hooks.
void request_late_attach();
// torchseal_start() .. torchseal_stop(): decides what the exit report does.
void set_interval_open(bool open);
// torchseal_stop() with its trigger: "stop", or "snapshot" (`torchseal
// attach --snapshot`, whose report adds what Python holds now). Returns the
// leaked allocations, or -1 (no interval, no report). fresh_scan as
// write_report's. interval.cpp.
int64_t end_interval_report(const char *trigger, bool fresh_scan = true);

// Per-thread nesting depth of hooked calls. A runtime call that reaches the
// driver through hooked pointers is one event, recorded by the outermost hook.
namespace hook_detail {
// Nesting depth of hooked calls on this thread (initial-exec: no TLS
// allocation on first touch, safe inside interposers).
extern __thread int t_depth __attribute__((tls_model("initial-exec")));
// Set while the shim is active, the hooks are the recording backend and this
// process has begun recording: the outermost hooked call then records with
// one load. Cleared before any of that stops being true.
extern std::atomic<bool> g_record_fast;
bool record_slow();
}  // namespace hook_detail

class HookScope {
 public:
  HookScope()
      : record_(hook_detail::t_depth++ == 0 &&
                (hook_detail::g_record_fast.load(std::memory_order_relaxed) ||
                 hook_detail::record_slow())) {}
  ~HookScope() { --hook_detail::t_depth; }
  HookScope(const HookScope &) = delete;
  HookScope &operator=(const HookScope &) = delete;
  // True in the outermost hooked call of an active shim.
  bool record() const { return record_; }

 private:
  bool record_;
};

}  // namespace torchseal
