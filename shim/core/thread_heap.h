// One block of T per thread, on the heap: made at the thread's first need and
// freed at its exit. For per-thread state too large for the shim's static TLS,
// which `torchseal attach` and torchseal.start() must find room for in a
// running process (docs/attach.md; tests/attach/static_tls.py holds it under
// glibc's 512 bytes). Only the pointer is thread_local (initial-exec), so the
// hot path pays one TLS load. T is value-initialized.
#pragma once

#include <pthread.h>

#include <new>

namespace torchseal {

template <typename T>
class ThreadHeap {
 public:
  // This thread's block, or nullptr before the first get_or_make() (or once
  // the thread's exit freed it).
  static T *get() { return t_block; }
  // nullptr only if the allocation failed.
  static T *get_or_make() { return t_block ? t_block : make(); }

 private:
  __attribute__((noinline)) static T *make() {
    T *p = new (std::nothrow) T{};
    if (!p) return nullptr;
    pthread_once(&once, [] { pthread_key_create(&key, drop); });
    pthread_setspecific(key, p);
    return t_block = p;
  }
  static void drop(void *p) {
    t_block = nullptr;
    delete static_cast<T *>(p);
  }
  static inline thread_local T *t_block __attribute__((tls_model("initial-exec"))) = nullptr;
  static inline pthread_key_t key;
  static inline pthread_once_t once = PTHREAD_ONCE_INIT;
};

}  // namespace torchseal
