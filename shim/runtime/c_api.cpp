// The public C API (README.md, "Quick start"). Safe to call at any time, from any
// thread, including before the first CUDA call (then they do nothing).
#include "torchseal.h"  // the declarations, so they cannot drift from these

#include "shim/core/counters.h"
#include "shim/core/recorder.h"
#include "shim/runtime/holder_scan/safe_points.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/report_files.h"

extern "C" {

// None of these wakes the shim: before the first CUDA call they do nothing,
// so a process that only imports a helper never writes files.
TORCHSEAL_API int torchseal_active(void) { return torchseal::is_active() ? 1 : 0; }

TORCHSEAL_API void torchseal_step(void) {
  if (!torchseal::is_active()) return;
  torchseal::recorder().on_step();
  torchseal::holders::at_step();
}

TORCHSEAL_API void torchseal_mark(const char *label) {
  if (label && torchseal::is_active()) torchseal::recorder().on_mark(label);
}

TORCHSEAL_API int torchseal_dump(const char *reason) {
  (void)reason;
  if (!torchseal::is_active()) return -1;
  return torchseal::write_report("api") >= 0 ? 0 : -1;
}

// The highest total of live bytes since the previous call with restart != 0
// (or since recording began); restart != 0 then starts a new window at the
// bytes live now. The report's peak_bytes stays the process's peak. -1
// before the first CUDA call. Used by the pytest plugin (limit_cuda_memory).
TORCHSEAL_API long long torchseal_peak_bytes(int restart) {
  if (!torchseal::is_active()) return -1;
  return static_cast<long long>(torchseal::counters().window_peak(restart != 0));
}

}  // extern "C"
