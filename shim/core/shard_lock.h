// A mutex that can be reset in a forked child. After fork() only the forking
// thread survives, so a lock held by any other thread at that moment would
// stay locked forever; the atfork child handler re-initialises every shard.
//
// The uncontended pair is one atomic exchange and a plain release store,
// inline: locked instructions, not instruction counts, dominated the hot
// path (twelve per alloc+free pair with pthread_mutex; bench/RESULTS.md).
// Every critical section is short (a probe, an append, a buffer swap)
// except a shard growing or a dump walking a table. A waiter spins briefly
// (the holder is usually running on another CPU), then sleeps in short
// futex waits: unlock is a plain store and wakes nobody, so a waiter whose
// holder was preempted gives its CPU back instead of spinning (8 threads
// on 2 cores ran at half the single-thread rate with sched_yield), and
// re-checks at most 50 us after the lock is free.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace torchseal {

class ShardLock {
 public:
  void lock() {
    if (!held_.exchange(1, std::memory_order_acquire)) return;
    lock_slow();
  }
  void unlock() { held_.store(0, std::memory_order_release); }
  void reset_after_fork() { held_.store(0, std::memory_order_relaxed); }

 private:
  __attribute__((noinline)) void lock_slow() {
    for (unsigned spins = 0;; ++spins) {
      // Test before test-and-set: waiters read a shared line, not bounce it.
      if (!held_.load(std::memory_order_relaxed) && !held_.exchange(1, std::memory_order_acquire))
        return;
      if (spins < 64) {
        __builtin_ia32_pause();
      } else {
        timespec nap{0, 50'000};
        syscall(SYS_futex, reinterpret_cast<uint32_t *>(&held_), FUTEX_WAIT_PRIVATE, 1, &nap,
                nullptr, 0);
      }
    }
  }

  std::atomic<uint32_t> held_{0};
};
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

class Guard {
 public:
  explicit Guard(ShardLock &l) : l_(l) { l_.lock(); }
  ~Guard() { l_.unlock(); }
  Guard(const Guard &) = delete;
  Guard &operator=(const Guard &) = delete;

 private:
  ShardLock &l_;
};

// Cheap mixing for addresses and IP sequences (splitmix64 finaliser).
inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace torchseal
