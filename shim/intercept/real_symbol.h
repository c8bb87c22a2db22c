// Resolution of the real implementation behind an interposed symbol.
#pragma once

#include <dlfcn.h>

namespace torchseal {

// The next definition after libtorchseal in the global lookup order. Cached
// per hook in a function-local static: resolving once is thread-safe and
// keeps dlsym out of the hot path.
void *next_symbol(const char *name);

}  // namespace torchseal

// Declares `real` as the next definition of `name`, typed like our own hook.
#define TS_REAL(name) \
  static const auto real = reinterpret_cast<decltype(&name)>(::torchseal::next_symbol(#name))
