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
//    maker's result) and never destroyed (threads may still call in while the
//    process exits). A build in progress carries the builder's thread id.
//    Other threads wait while that thread is alive in their own process
//    (tgkill with signal 0); a mark left by a thread this process does not
//    have (its parent's, copied by fork; one that died mid-build) is taken
//    over. A build that throws leaves no mark. A thread that comes back into
//    its own build (recursion, a signal handler) aborts with one line, as a
//    recursive static initialisation does.
//  - Resolved<P>: a pointer or value found by a lookup that may run more than
//    once and always finds the same answer (dlsym, a table search). Racing
//    threads both look; none waits. "Not found" (a zero P) is looked up again
//    on the next call.
//
// Declare both `static constinit` (in a function or at namespace scope):
// constinit is what proves that no guard is emitted. tests/layering checks
// that libtorchseal.so calls __cxa_guard_acquire nowhere.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>

#include <atomic>
#include <mutex>
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
    const int me = static_cast<int>(syscall(SYS_gettid));
    const int pid = static_cast<int>(getpid());
    for (unsigned spins = 0;; ++spins) {
      if (T *p = ptr_.load(std::memory_order_acquire)) return *p;
      int owner = builder_.load(std::memory_order_acquire);
      if (owner == me) {
        // This thread is already building it: the constructor (or a signal
        // handler that interrupted it) came back here. Waiting would hang.
        static const char msg[] = "torchseal: internal error: recursive lazy initialisation\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
      }
      // Nobody, or a builder that is no thread of this process: a parent's
      // thread (the build was copied by fork) or a thread that died in it.
      bool gone = owner == 0 || syscall(SYS_tgkill, pid, owner, 0) != 0;
      if (gone && builder_.compare_exchange_strong(owner, me, std::memory_order_acq_rel)) {
        try {
          T *p = new (storage_) T(make());
          ptr_.store(p, std::memory_order_release);
          return *p;
        } catch (...) {
          builder_.store(0, std::memory_order_release);  // the next call tries again
          throw;
        }
      }
      if (spins < 64) {
        sched_yield();
      } else {
        timespec nap{0, 100'000};  // a long build (a dlopen): give the CPU back
        nanosleep(&nap, nullptr);
      }
    }
  }

  alignas(T) unsigned char storage_[sizeof(T)]{};
  std::atomic<T *> ptr_{nullptr};
  // The thread building it (kernel tid); 0: nobody yet, or a build that threw.
  std::atomic<int> builder_{0};
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

// Registers pthread_atfork handlers that hold M across a fork: the forking
// thread takes it before the fork, so a fork waits for a critical section
// another thread is in, and the child gets M free and what it guards whole
// (a mutex merely re-made in the child would leave the data half-updated by a
// thread the child does not have). Only for short sections. Prepare handlers
// run in the reverse order of registration, so a section that takes another
// lock held across fork must be registered after that lock's handlers
// (got_patch.cpp registers after the loader walk's).
template <std::mutex &M>
void hold_across_fork() {
  pthread_atfork([] { M.lock(); }, [] { M.unlock(); }, [] { new (&M) std::mutex(); });
}

}  // namespace torchseal
