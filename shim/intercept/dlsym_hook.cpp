#include "shim/intercept/dlsym_hook.h"

#include <dlfcn.h>

#include <cstring>

#include "common/util/fork_safe.h"
#include "shim/core/driver_api.h"

// Sanitizer runtimes resolve their interceptors with dlsym(RTLD_NEXT, ...)
// while they initialize, before their shadow memory exists, and that lookup
// lands here. So in a sanitizer build of the shim, the code on that path must
// not be instrumented.
#define TS_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread")))

extern "C" {
// Read by the assembly trampoline in dlsym_trampoline.S.
__attribute__((visibility("hidden"))) void *torchseal_real_dlsym_ptr = nullptr;
__attribute__((visibility("hidden"))) void *torchseal_dlsym_filter(void *handle, const char *name);
}

namespace torchseal {
namespace {

TS_UNINSTRUMENTED void resolve_real_dlsym() {
  if (torchseal_real_dlsym_ptr) return;
  void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  if (!p) {
    // Loaded by dlopen (torchseal.start()): libc comes before us in the
    // lookup order, so RTLD_NEXT cannot find it; ask libc itself.
    if (void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD)) {
      p = dlvsym(libc, "dlsym", "GLIBC_2.34");
      if (!p) p = dlvsym(libc, "dlsym", "GLIBC_2.2.5");
    }
  }
  __atomic_store_n(&torchseal_real_dlsym_ptr, p, __ATOMIC_RELEASE);
}

}  // namespace

void *real_dlsym(void *handle, const char *name) {
  resolve_real_dlsym();
  auto fn = reinterpret_cast<void *(*)(void *, const char *)>(
      __atomic_load_n(&torchseal_real_dlsym_ptr, __ATOMIC_ACQUIRE));
  return fn ? fn(handle, name) : nullptr;
}

bool shim_interposed() {
  // libc is in the initial scope of every process, so its dlsym comes first
  // unless torchseal was loaded ahead of it.
  static constinit Resolved<int> interposed;  // 1: no, 2: yes
  return interposed.get([] {
    void *found = real_dlsym(RTLD_DEFAULT, "dlsym");
    Dl_info found_info, self_info;
    if (!found || !dladdr(found, &found_info)) return 1;
    if (!dladdr(reinterpret_cast<void *>(&resolve_real_dlsym), &self_info)) return 1;
    return found_info.dli_fbase == self_info.dli_fbase ? 2 : 1;
  }) == 2;
}

}  // namespace torchseal

// Returns our wrapper when `name` is a driver function we wrap and the real
// one exists behind `handle`; nullptr means "forward the call untouched".
TS_UNINSTRUMENTED void *torchseal_dlsym_filter(void *handle, const char *name) {
  torchseal::resolve_real_dlsym();
  // Cheap reject first: every wrapped name starts with "cu" + uppercase.
  if (!name || name[0] != 'c' || name[1] != 'u' || name[2] < 'A' || name[2] > 'Z') return nullptr;
  torchseal::ApiId id;
  void *wrapper = torchseal::driver_wrapper_for_name(name, &id);
  if (!wrapper) return nullptr;
  // Pseudo-handles would find our own export first; let the real dlsym (by
  // tail jump, caller preserved) answer those, and our exported wrapper then
  // reaches the real function through RTLD_NEXT.
  if (handle == RTLD_NEXT || handle == RTLD_DEFAULT) return nullptr;
  void *real = torchseal::real_dlsym(handle, name);
  if (!real) return nullptr;
  return torchseal::wrap_driver_pointer(real);
}
