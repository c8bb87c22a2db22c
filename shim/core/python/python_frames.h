// Python frames for every recorded event, captured without the GIL.
//
// At an intercepted CUDA call the calling thread's own CPython frame chain is
// read with raw loads (no GIL, no Python API that can allocate, run code or
// touch a refcount), every frame is resolved to (function, file, line) while
// its code object is provably alive, and the sequence is interned as a
// PyStackId. See shim/core/python/README.md for the design and its limits.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/model/analysis_input.h"  // PyFrame
#include "common/model/event.h"           // PyStackId

namespace torchseal::py {

// Once, at shim init. Detects a CPython in the process and picks the layout
// for its version; an unsupported one logs one warning and stays disabled.
// enabled=false (TORCHSEAL_PYTHON=off) disables for good. Safe without Python.
void init(bool enabled);

// "3.12.1"; "" when there is no (supported) Python or it is disabled.
std::string version();

// HOT PATH: the calling thread's Python stack, innermost first (at most 128
// frames, the innermost kept), interned. 0 = no Python frames (no Python, a
// thread without a Python thread state, interpreter finalizing).
// A thread with a thread state but no frames (PyTorch's autograd engine
// thread) borrows the stack of the thread waiting in backward, below a label
// frame "<autograd NODE>" (file "", line 0); see backward_waiter.h.
// When init() found no Python, it looks again now and then (a program may
// dlopen libpython after its first CUDA call).
PyStackId capture();

// Names what a frameless thread is doing for the thread whose stack it
// borrows: writes e.g. "PowBackward0" (the autograd node on the calling
// thread's native stack) into `out` and returns true, or returns false.
// Called only on the borrowed-stack path, inside the intercepted call.
using BorrowLabelFn = bool (*)(char *out, size_t cap);
void set_borrow_label(BorrowLabelFn fn);

// True once the interpreter has begun finalizing (or has finished): module
// globals are being freed, so what is live no longer says what the program
// kept. Stays true. False without Python. Reads runtime flags, no GIL.
bool interpreter_exiting();

// The program is done: its atexit handlers are running (the holder scan's
// exit hook calls this). interpreter_exiting() is true from now on, so time
// windows stop sampling here too: the exit scan can take a while under load,
// and windows sampled meanwhile saw a flat tail that read as a plateau.
void note_exit_begun();

// Every interned stack, indexed by PyStackId (out[0] is the empty stack).
void export_all(std::vector<std::vector<PyFrame>> &out);

// Calls fn for every stack interned since `cursor` (0 at first), in id
// order, then advances it. fn runs without internal locks held.
void for_each_since(uint64_t &cursor,
                    const std::function<void(PyStackId, const std::vector<PyFrame> &)> &fn);

// In a forked child: reinitialise locks (only the forking thread survives).
void reset_after_fork();

}  // namespace torchseal::py
