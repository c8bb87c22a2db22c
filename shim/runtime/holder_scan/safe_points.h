// Safe points for the holder scan (docs/report-format.md): the moments the
// shim may run Python to find which objects keep live GPU memory alive.
//
// Never inside an intercepted call: a garbage collection there can free a
// tensor and re-enter the allocator's lock. A safe point is a thread that
// holds (or takes) the GIL with no hooked call on its stack:
//   * torchseal_step() and torchseal_dump() called from Python (ctypes
//     releases the GIL; the scan takes it back);
//   * a Py_AddPendingCall run by the main thread at its next bytecode, asked
//     for by the writer thread before a signal or OOM dump;
//   * an atexit hook, registered at the first safe point, so the scan runs
//     while the interpreter is still whole.
#pragma once

#include "common/model/analysis_input.h"

namespace torchseal::holders {

// At shim activation (inside the first hooked call: nothing runs here but a
// Py_AddPendingCall). enabled = TORCHSEAL_HOLDERS is not off.
void init(bool enabled);

// torchseal_step(): scans when this thread is a safe point, at most ~5% of
// the time between steps (always at the first step after an OOM).
void at_step();

// Before a dump report: a fresh scan, here if this thread is a safe point,
// else by the main thread (pending call), waited for a bounded time.
void before_dump();

// A dump scan here and now, GIL held (`torchseal attach`'s final report).
// False when this is no safe point at the moment, a scan of its own running
// included (its Python code reaches pending calls too): ask again later.
bool scan_for_report();

// The latest scan (the exit scan once it ran) and each OOM's holders.
void fill(AnalysisInput &in);

// An interval starts (torchseal.start()): memory by role restarts with it,
// so a scan from before the start is neither its report's latest nor its
// peak, nor one of its steps.
void begin_interval();

// `torchseal attach` detaching, GIL held at a safe point: no more scans,
// and the atexit hook goes (the interpreter keeps no pointer into the shim).
void detach();

// Child side of fork: forget the parent's scans.
void reset_after_fork();

}  // namespace torchseal::holders
