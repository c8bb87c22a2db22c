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

#include "shim/core/python/python_runtime.h"

namespace torchseal::py {

// The thread state of a thread other than `self` whose innermost Python
// frame is autograd's engine call, or 0. With several waiting, the one first
// seen waiting most recently. Reads the interpreter's thread list and each
// thread's innermost frame without the GIL (README.md: where it can be wrong).
uintptr_t find_backward_waiter(const Interp &in, uintptr_t self);

// True for the engine-call frames: _engine_run_backward in
// torch/autograd/graph.py (torch 2.2+), backward/grad in
// torch/autograd/__init__.py (older torch called the engine from there).
bool is_engine_call(const char *function, const char *file);

void reset_waiters_after_fork();

}  // namespace torchseal::py
