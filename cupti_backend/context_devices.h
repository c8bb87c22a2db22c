// CUcontext -> device ordinal, for callbacks that only carry a context.
//
// CUpti_CallbackData names the context but not the device. Asking the
// driver on every allocation would mean a driver call per event from inside
// a callback, so the answer is asked once per context (the first time it is
// needed, when that context is current on the calling thread) and cached in
// a small lock-free table. Destroyed contexts are forgotten: the driver may
// hand the same pointer to a new context on another device.
#pragma once

#include <cuda.h>

namespace torchseal::cupti {

// Device of `ctx`, or -1 if unknown (not cached and not current here).
int device_of_context(CUcontext ctx);
// The device of this thread's current context, -1 if none.
int current_device();
void forget_context(CUcontext ctx);
void forget_all_contexts();

}  // namespace torchseal::cupti
