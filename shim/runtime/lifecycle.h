// When torchseal wakes up, how it survives fork, and how it ends.
//
// The constructor does nothing: a process that never calls CUDA (sh, a
// DataLoader worker, nvidia-smi) pays one relaxed load per hooked call and
// writes no files. The first CUDA call parses the configuration and arms the
// exit report; a bad setting leaves the shim inert with one line on stderr.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/settings/config.h"
#include "shim/core/activation.h"

namespace torchseal {

enum class ShimState : int { Uninit = 0, Active = 1, Disabled = 2, Finished = 3 };

// The settings; only while active.
const Config &config();
// The settings without activating (parsed on the first call); nullptr when a
// value is bad, which leaves the shim inert at its first CUDA call.
const Config *parsed_config();
const char *backend_name();
// How native stacks are walked (unwinder_init's answer); "" before activation.
const char *unwinder_name();

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

}  // namespace torchseal
