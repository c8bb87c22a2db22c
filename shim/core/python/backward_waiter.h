// Which Python thread an autograd engine thread is working for.
//
// PyTorch runs backward on one engine thread per device: it has a Python
// thread state (PythonEngine::thread_init) but no Python frames, while the
// thread that called loss.backward() waits, GIL released, with
// torch/autograd/graph.py:_engine_run_backward as its innermost frame. An
// event on a frameless thread borrows that waiting thread's stack
// (python_frames.cpp). Slow path only: threads with frames never get here.
#pragma once

#include <cstdint>

#include "shim/core/python/code_locations.h"
#include "shim/core/python/python_runtime.h"

namespace torchseal::py {

// The Python stack of the thread that waits in autograd's engine call for
// the engine thread `self` (innermost first, at most cap frames), or 0
// frames. With several waiting, the one first seen waiting most recently.
// Reads the interpreter's thread list and other threads' frames without the
// GIL, every read guarded (read_guarded: a thread that ends and frees its
// state meanwhile ends the walk, never faults); the waiter's stack is
// walked once per backward() call and reused while its innermost frame
// stays put (README.md: where it can be wrong).
int borrow_backward_stack(const Interp &in, uintptr_t self, uint64_t now_ns, PositionKey *out,
                          int cap);

// True for the engine-call frames: _engine_run_backward in
// torch/autograd/graph.py (torch 2.2+), backward/grad in
// torch/autograd/__init__.py (older torch called the engine from there).
bool is_engine_call(const char *function, const char *file);

void reset_waiters_after_fork();

}  // namespace torchseal::py
