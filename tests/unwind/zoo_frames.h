// Frames of every shape the fast unwinder must walk exactly like libunwind
// (tests/unwind). Compiled without frame pointers and optimised, in a
// shared library, so the walker meets rsp-based CFA rules, saved-rbp slots,
// realigned and alloca frames, and a library boundary.
#pragma once

#include <cstddef>

extern "C" {
// Calls `leaf` at the bottom of `depth` frames of mixed shapes.
void zoo_mixed(int depth, void (*leaf)(void *), void *arg);
// A frame realigned to 64 bytes (GCC: `and $-64,%rsp`, CFA by expression).
void zoo_realigned(void (*leaf)(void *), void *arg);
// A frame with a variable-length alloca.
void zoo_alloca(size_t bytes, void (*leaf)(void *), void *arg);
// Calls zoo_mixed(2, leaf, arg) `n` times with the call count in rbp, as
// code built without frame pointers keeps a loop counter there: the frames
// below save a value that changes on every call, and no frame reads it.
void zoo_rbp_counter(int n, void (*leaf)(void *), void *arg);
}
