// The CUPTI backend's interface to the shim's lifecycle.
#pragma once

#include <string>

#include "common/settings/config.h"

namespace torchseal::cupti {

// Loads libcupti (TORCHSEAL_CUPTI_PATH, the default search path, the CUDA
// toolkit's lib directories, Python's nvidia/*/lib wheel directories) and
// subscribes to the driver-API memory callbacks, the runtime API (to name the
// user-facing call) and the resource domain. Returns true when CUPTI now feeds
// the recorder; otherwise fills `why` with one line (e.g. another subscriber
// holds the slot, or libcupti is missing) and leaves no subscription behind.
bool start(const Config &cfg, std::string &why);

// True while the subscription is live: the hook backend must not record then.
bool running();

// Unsubscribes (idempotent). Called before the exit report is written.
void stop();

// Another subscriber asked for the slot (subscribe_hook.cpp): hands it over
// if torchseal holds it, the hooks recording from then on, and says so in
// one line. True if the slot was freed.
bool hand_over_slot();

}  // namespace torchseal::cupti
