// Resolution of the real implementation behind an interposed symbol.
#pragma once

#include <dlfcn.h>

#include "common/util/fork_safe.h"

namespace torchseal {

// The next definition after libtorchseal in the global lookup order. Cached
// per hook in a guard-free slot (common/util/fork_safe.h): dlsym stays out of
// the hot path, and a child forked while a thread was resolving never waits
// for that thread.
void *next_symbol(const char *name);

}  // namespace torchseal

// Declares `real` as the next definition of `name`, typed like our own hook.
#define TS_REAL(name)                                                                   \
  static constinit ::torchseal::Resolved<decltype(&name)> real_slot_;                   \
  const auto real = real_slot_.get(                                                     \
      [] { return reinterpret_cast<decltype(&name)>(::torchseal::next_symbol(#name)); })
