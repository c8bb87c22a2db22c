// The GIL-free walk over the calling thread's own frame chain: collects
// (code object, byte offset, fingerprint) per Python frame, innermost first.
// Only this thread pushes and pops its frames, and it is inside our hook, so
// the chain is stable whether it holds the GIL or released it.
#pragma once

#include <cstdint>

#include "shim/core/python/code_locations.h"
#include "shim/core/python/python_runtime.h"

namespace torchseal::py {

constexpr int kMaxPyFrames = 128;

// Returns the number of frames written (at most cap, innermost kept).
int walk_frames(const Interp &in, uintptr_t tstate, PositionKey *out, int cap);

// The same walk over ANOTHER thread's frames, which that thread may push,
// pop or free meanwhile: every read is guarded (read_guarded), so a freed
// frame or thread state ends the walk instead of faulting. The result is
// what the chain looked like at some moment during the walk, or a prefix.
int walk_other_thread(const Interp &in, uintptr_t tstate, PositionKey *out, int cap);

}  // namespace torchseal::py
