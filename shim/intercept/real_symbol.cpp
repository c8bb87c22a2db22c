#include "shim/intercept/real_symbol.h"

#include "common/util/log.h"
#include "shim/intercept/dlsym_hook.h"

namespace torchseal {

namespace {

// A shim loaded by dlopen (torchseal.start()) comes after the CUDA
// libraries in the lookup order, so RTLD_NEXT finds nothing: ask them.
void *from_cuda_libraries(const char *name) {
  static const char *const kLibs[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                      "libcudart.so",    "libcuda.so.1",    "libcupti.so.13",
                                      "libcupti.so"};
  for (const char *lib : kLibs) {
    void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    void *p = real_dlsym(h, name);
    dlclose(h);
    if (p) return p;
  }
  return nullptr;
}

}  // namespace

void *next_symbol(const char *name) {
  void *p = real_dlsym(RTLD_NEXT, name);
  if (!p) p = from_cuda_libraries(name);
  if (!p) log::debug("no real %s after the shim; the call will fail", name);
  return p;
}

}  // namespace torchseal
