// The public C API (README.md, "Quick start"). Safe to call at any time, from any
// thread, including before the first CUDA call (then they do nothing).
#include "shim/core/counters.h"
#include "shim/core/python/safe_points.h"
#include "shim/core/recorder.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/report_files.h"

extern "C" {

// None of these wakes the shim: before the first CUDA call they do nothing,
// so a process that only imports a helper never writes files.
__attribute__((visibility("default"))) int torchseal_active(void) {
  return torchseal::is_active() ? 1 : 0;
}

__attribute__((visibility("default"))) void torchseal_step(void) {
  if (!torchseal::is_active()) return;
  torchseal::recorder().on_step();
  torchseal::holders::at_step();
}

__attribute__((visibility("default"))) void torchseal_mark(const char *label) {
  if (label && torchseal::is_active()) torchseal::recorder().on_mark(label);
}

__attribute__((visibility("default"))) int torchseal_dump(const char *reason) {
  (void)reason;
  if (!torchseal::is_active()) return -1;
  return torchseal::write_report("api") >= 0 ? 0 : -1;
}

}  // extern "C"
