// A walk of the loaded objects (dl_iterate_phdr, dladdr-free) that a fork
// never cuts in half.
//
// glibc 2.36's fork re-initialises the loader's dl_load_lock in the child,
// but not dl_load_write_lock, which dl_iterate_phdr holds while it walks. A
// fork while one of our threads (the history writer's pass, every 50 ms) is
// inside dl_iterate_phdr leaves the child's first walk waiting forever (seen:
// a forked child stuck on _rtld_global._dl_load_write_lock). Every walk the
// shim makes holds this guard, and fork waits for it (pthread_atfork).
#pragma once

namespace torchseal {

class LoaderWalkGuard {
 public:
  LoaderWalkGuard();
  ~LoaderWalkGuard();
  LoaderWalkGuard(const LoaderWalkGuard &) = delete;
  LoaderWalkGuard &operator=(const LoaderWalkGuard &) = delete;
};

}  // namespace torchseal
