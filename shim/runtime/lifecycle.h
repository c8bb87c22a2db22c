// When torchseal wakes up, how it survives fork, and how it ends.
//
// The constructor does nothing: a process that never calls CUDA (sh, a
// DataLoader worker, nvidia-smi) pays one relaxed load per hooked call and
// writes no files. The first CUDA call parses the configuration and arms the
// exit report; a bad setting leaves the shim inert with one line on stderr.
#pragma once

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
// torchseal_start() is about to wake a late shim: the process allocated
// before it, so frees of unknown memory are pre-existing, and the callers'
// GOT entries are pointed at the hooks.
void request_late_attach();
// torchseal_start() .. torchseal_stop(): decides what the exit report does.
void set_interval_open(bool open);

}  // namespace torchseal
