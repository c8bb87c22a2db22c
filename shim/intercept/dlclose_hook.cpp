// dlclose() interposer: unloading code invalidates the frame rules learned
// for its addresses (another object may be mapped there next). dlclose is
// not caller-sensitive, so forwarding through RTLD_NEXT is exact.
#include <dlfcn.h>
#include <link.h>

#include <atomic>

#include "shim/core/loader_walk.h"
#include "common/util/fork_safe.h"
#include "shim/core/unwind/unwinder.h"
#include "shim/intercept/dlsym_hook.h"

namespace {

std::atomic<unsigned long long> g_seen_subs{0};

int read_subs(struct dl_phdr_info *info, size_t size, void *out) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
    *static_cast<unsigned long long *>(out) = info->dlpi_subs;
  return 1;  // the counters are global; the first object is enough
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int dlclose(void *handle) {
  using Fn = int (*)(void *);
  static constinit torchseal::Resolved<Fn> slot;
  Fn real = slot.get([] { return reinterpret_cast<Fn>(torchseal::real_dlsym(RTLD_NEXT, "dlclose")); });
  if (!real) return -1;
  // What was loaded before, so an unload of code without learned rules can
  // keep them (unwinder.h). One walk of the loaded objects a call.
  torchseal::CodeRanges before = torchseal::unwinder_code_before_unload();
  int rc = real(handle);
  // Most dlclose calls only drop a reference; clear only after a real unmap.
  unsigned long long subs = 0;
  {
    torchseal::LoaderWalkGuard walking;
    dl_iterate_phdr(read_subs, &subs);
  }
  if (subs != g_seen_subs.exchange(subs, std::memory_order_relaxed))
    torchseal::unwinder_code_unloaded(before);
  return rc;
}
