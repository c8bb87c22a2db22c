// torchseal_start() / torchseal_stop(): recording bounded by the program
// itself (torchseal.Tracker, the %%torchseal cell magic, a test).
//
// Preloaded, the shim has seen everything: what is live at the start is set
// aside as pre-existing and the stop report lists what the interval left
// behind. Loaded late by dlopen, the start also wakes the shim: CUPTI if it
// takes a late subscriber, else the callers' GOT entries (lifecycle.cpp).
#include "torchseal.h"

#include <pthread.h>

#include <mutex>
#include <new>
#include <string>

#include "common/util/log.h"
#include "shim/core/recorder.h"
#include "shim/runtime/holder_scan/safe_points.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/report_files.h"

namespace {

std::mutex g_mutex;
std::string *g_interval_prefix = nullptr;  // never freed: read at exit

// Held across a whole report, which may wait for the main thread's Python
// (the holder scan), so a fork cannot wait for it: a child forked while
// another thread is in there gets the lock free (its own torchseal_start and
// torchseal_stop would wait forever) and no interval. The parent's prefix is
// left behind, not read: that thread may have been assigning it (a child
// freed a pointer of it in fork_hammer). A child records its own, from its
// own first CUDA call, and opens its own intervals.
void interval_lock_child() {
  new (&g_mutex) std::mutex();
  g_interval_prefix = nullptr;
  torchseal::set_interval_open(false);
}
__attribute__((constructor)) void reset_interval_lock_in_child() {
  pthread_atfork(nullptr, nullptr, interval_lock_child);
}

}  // namespace

namespace torchseal {

int64_t end_interval_report(const char *trigger, bool fresh_scan) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!is_active() || !g_interval_prefix || g_interval_prefix->empty()) return -1;
  int64_t leaks = write_report(trigger, *g_interval_prefix, fresh_scan);
  recorder().end_interval();
  set_interval_open(false);
  g_interval_prefix->clear();
  return leaks;
}

}  // namespace torchseal

extern "C" {

// Returns 0, or -1 when the shim cannot record (a bad setting, said once).
TORCHSEAL_API int torchseal_start(const char *prefix) {
  using namespace torchseal;
  if (!prefix || !*prefix) return -1;
  std::lock_guard<std::mutex> lock(g_mutex);
  // Before the shim wakes: a late shim's history goes under this prefix.
  if (loaded_late() && !is_active()) {
    set_output_prefix(prefix);
    request_late_attach();
  }
  if (!ensure_active()) return -1;
  if (!g_interval_prefix) g_interval_prefix = new std::string();
  *g_interval_prefix = prefix;
  recorder().begin_interval();
  holders::begin_interval();
  set_interval_open(true);
  if (recorder().attached_late())
    set_output_prefix(prefix);  // an open interval reports here at exit
  log::debug("interval started; its report goes to %s.json", prefix);
  return 0;
}

// Writes the interval's report to the prefix given to torchseal_start.
// Returns the number of leaked allocations, or -1 (no interval, no report).
TORCHSEAL_API long long torchseal_stop(void) { return torchseal::end_interval_report("stop"); }

}  // extern "C"
