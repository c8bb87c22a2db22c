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

// Free-threaded 3.14+: where the bytecode copy a frame runs starts, by code
// object and copy index (thread-local bytecode). Finding one takes two
// guarded reads (about 2 us), so each thread keeps the ones its frames ran.
// A copy lives as long as its code object while some thread holds its index
// (Objects/codeobject.c, _Py_ClearUnusedTLBC), and a slot is only trusted
// while the instruction pointer falls inside it.
struct TlbcCache {
  static constexpr int kSlots = 256;
  struct Slot {
    uintptr_t code;  // 0 = empty
    uint64_t fingerprint;
    int64_t index;
    uintptr_t start;
  };
  Slot slots[kSlots];
};

// Returns the number of frames written (at most cap, innermost kept).
// `tlbc` (may be null) is the calling thread's own cache.
int walk_frames(const Interp &in, uintptr_t tstate, PositionKey *out, int cap, TlbcCache *tlbc);

// The same walk over ANOTHER thread's frames, which that thread may push,
// pop or free meanwhile: every read is guarded (read_guarded), so a freed
// frame or thread state ends the walk instead of faulting. The result is
// what the chain looked like at some moment during the walk, or a prefix.
int walk_other_thread(const Interp &in, uintptr_t tstate, PositionKey *out, int cap);

}  // namespace torchseal::py
