// A mutex that can be reset in a forked child. After fork() only the forking
// thread survives, so a lock held by any other thread at that moment would
// stay locked forever; the atfork child handler re-initialises every shard.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace torchseal {

class ShardLock {
 public:
  void lock() { pthread_mutex_lock(&m_); }
  void unlock() { pthread_mutex_unlock(&m_); }
  void reset_after_fork() { m_ = PTHREAD_MUTEX_INITIALIZER; }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

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
