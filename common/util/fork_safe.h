// Values built on first use without a function-local static's guard.
//
// A forked child inherits every guard as the fork found it. If another thread
// of the parent was inside a guarded initialiser at that moment, the child's
// first use waits forever for a thread it does not have. CI saw exactly that:
// a fork_hammer child stuck in __cxa_guard_acquire from the shim's atfork
// handler, the parent's writer thread having been building the Python stack
// table when the fork came. The shim is loaded into every child process, so
// what it builds lazily is of two kinds, both constant-initialised (no guard
// of their own, no destructor, nothing registered with atexit):
//
//  - Lazy<T>: one object, built on first use (default-constructed, or from a
//    maker's result) and never destroyed (threads may
//    still call in while the process exits). A build in progress carries the
//    builder's pid; a process that finds another process's mark (its
//    parent's, after fork) builds the object again itself. Other threads of
//    the builder's own process wait for it.
//  - Resolved<P>: a pointer or value found by a lookup that may run more than
//    once and always finds the same answer (dlsym, a table search). Racing
//    threads both look; none waits. "Not found" (a zero P) is looked up again
//    on the next call.
//
// Declare both `static constinit` (in a function or at namespace scope):
// constinit is what proves that no guard is emitted. tests/layering checks
// that libtorchseal.so calls __cxa_guard_acquire nowhere.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace torchseal {

template <class T>
class Lazy {
 public:
  constexpr Lazy() = default;
  Lazy(const Lazy &) = delete;
  Lazy &operator=(const Lazy &) = delete;

  T &get() {
    return get([] { return T(); });
  }
  // Built from make()'s result the first time (make may run again in a
  // forked child, as above).
  template <class F>
  T &get(F &&make) {
    T *p = ptr_.load(std::memory_order_acquire);
    return p ? *p : build(make);
  }
  // The object if it was built, without building it: for atfork handlers,
  // which have nothing to reset in an object the process never made.
  T *built() const { return ptr_.load(std::memory_order_acquire); }

 private:
  template <class F>
  __attribute__((noinline)) T &build(F &make) {
    const int me = static_cast<int>(getpid());
    for (;;) {
      if (T *p = ptr_.load(std::memory_order_acquire)) return *p;
      int owner = builder_.load(std::memory_order_acquire);
      // owner == me: another thread of this process is building; wait.
      // Any other pid is a parent's unfinished build, copied by fork.
      if (owner != me && builder_.compare_exchange_strong(owner, me, std::memory_order_acq_rel)) {
        T *p = new (storage_) T(make());
        ptr_.store(p, std::memory_order_release);
        return *p;
      }
      sched_yield();
    }
  }

  alignas(T) unsigned char storage_[sizeof(T)]{};
  std::atomic<T *> ptr_{nullptr};
  std::atomic<int> builder_{0};  // pid of the process building it; 0: nobody yet
};

template <class P>
class Resolved {
 public:
  constexpr Resolved() = default;
  Resolved(const Resolved &) = delete;
  Resolved &operator=(const Resolved &) = delete;

  template <class F>
  P get(F &&lookup) {
    P p = v_.load(std::memory_order_acquire);
    if (p) return p;
    p = lookup();
    if (p) v_.store(p, std::memory_order_release);
    return p;
  }

 private:
  std::atomic<P> v_{};
};

}  // namespace torchseal
