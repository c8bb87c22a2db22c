#include "shim/intercept/real_symbol.h"

#include "shim/runtime/log.h"

namespace torchseal {

void *next_symbol(const char *name) {
  void *p = dlsym(RTLD_NEXT, name);
  if (!p) log::debug("no real %s after the shim; the call will fail", name);
  return p;
}

}  // namespace torchseal
