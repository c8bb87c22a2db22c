// Finding a CPython interpreter in this process: its version, the handful of
// exported functions and type objects a GIL-free stack walk needs, and the
// layout table for its version. Runs at init (and on a late re-probe), never
// in the hot path.
#pragma once

#include <cstdint>
#include <string>

#include "shim/core/python/cpython_layouts.h"

namespace torchseal::py {

struct Interp {
  const Layout *layout = nullptr;
  uint32_t version_hex = 0;
  char version[32] = {};  // "3.12.1", "3.13.0rc2"

  // All three are pure reads in 3.10-3.13: runtime flags and a
  // pthread_getspecific on the GIL-state TSS key. No lock, no allocation.
  int (*is_initialized)() = nullptr;
  int (*is_finalizing)() = nullptr;
  void *(*this_thread_state)() = nullptr;

  // Optional (borrowed stacks, backward_waiter.h): the main interpreter and
  // its thread-state list. Pure reads of runtime and interpreter fields.
  // Null when not exported; then no thread's stack is borrowed.
  void *(*main_interp)() = nullptr;
  void *(*thread_head)(void *interp) = nullptr;
  void *(*thread_next)(void *tstate) = nullptr;

  // Type objects, compared with ob_type to validate pointers before use.
  uintptr_t code_type = 0;
  uintptr_t unicode_type = 0;
  uintptr_t bytes_type = 0;
};

enum class ProbeResult {
  Found,        // `out` is complete and validated
  Absent,       // no CPython in the process (yet)
  Unsupported,  // CPython present but not readable; `why` says why
};

ProbeResult probe_interpreter(Interp &out, std::string &why);

// A CPython C-API function or object by name, looked up where
// probe_interpreter() finds the interpreter; nullptr when absent. For the
// code that runs Python at safe points (holders.h), never in the hot path.
void *python_symbol(const char *name);

// A counter that changes whenever a shared object is loaded, so a late
// re-probe runs only after a dlopen (glibc's dlpi_adds).
uint64_t loaded_object_generation();

}  // namespace torchseal::py
