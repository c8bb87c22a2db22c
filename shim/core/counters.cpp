#include "shim/core/counters.h"

#include <pthread.h>

#include <new>

namespace torchseal {

__thread Counters::Mine Counters::t_mine;
__thread Counters::Mine Counters::t_parked;
__thread Counters::WatchFn Counters::t_watch;

namespace {
std::atomic<uint32_t> g_next_stripe{1};
// Owned stripes given back by exited threads (bit i: stripe i). Programs
// that start and end threads all the time (pools, PyTorch's DataLoader,
// Google Benchmark's runs) would otherwise run out of owned stripes and
// have every later thread add atomically to one shared line.
std::atomic<uint64_t> g_free_stripes{0};
pthread_key_t g_exit_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

void on_thread_exit(void *) { g_counters.release_stripe(); }
void make_key() { pthread_key_create(&g_exit_key, on_thread_exit); }

uint32_t take_free_stripe() {
  uint64_t free = g_free_stripes.load(std::memory_order_relaxed);
  while (free) {
    uint64_t bit = free & -free;
    // Acquire: the previous owner's last plain stores to the stripe.
    if (g_free_stripes.compare_exchange_weak(free, free & ~bit, std::memory_order_acquire,
                                             std::memory_order_relaxed))
      return static_cast<uint32_t>(__builtin_ctzll(bit));
  }
  return 0;
}
}  // namespace

void Counters::fold(Stripe &s) {
  int64_t d = s.pending.exchange(0, std::memory_order_relaxed);
  if (d) add_global(d);
}

// A thread owns a stripe and counts in it with plain loads and stores: no
// locked instruction on the hot path. Past kStripes - 1 threads alive at
// once, the others share stripe 0 and add atomically.
Counters::Mine &Counters::claim_stripe(int64_t delta) {
  if (WatchFn fn = t_watch) {
    if (!fn(delta)) return t_parked;
    t_watch = nullptr;
    t_mine = t_parked;
    return t_mine;
  }
  return claim_new_stripe();
}

Counters::Mine &Counters::claim_new_stripe() {
  uint32_t id = take_free_stripe();
  if (!id) {
    id = g_next_stripe.load(std::memory_order_relaxed);
    while (id < kStripes &&
           !g_next_stripe.compare_exchange_weak(id, id + 1, std::memory_order_relaxed)) {}
    if (id >= kStripes) id = 0;
  }
  t_mine.owned = id != 0;
  t_mine.stripe = &stripes_[id];
  if (t_mine.owned) {
    pthread_once(&g_key_once, make_key);
    pthread_setspecific(g_exit_key, t_mine.stripe);
  }
  return t_mine;
}

// At thread exit: the thread's live bytes go to the global count and its
// stripe to the next thread. Events this thread still records after this
// (other TLS destructors freeing memory) go to the shared stripe.
void Counters::watch_thread(WatchFn fn) {
  if (!t_watch) {
    if (!t_mine.stripe) claim_new_stripe();
    t_parked = t_mine;
    t_mine.stripe = nullptr;
  }
  t_watch = fn;
}

void Counters::release_stripe() {
  if (t_watch) {  // the watch ends with the thread
    t_watch = nullptr;
    t_mine = t_parked;
  }
  Stripe *s = t_mine.stripe;
  if (!s || !t_mine.owned) return;
  fold(*s);
  t_mine.stripe = &stripes_[0];
  t_mine.owned = false;
  g_free_stripes.fetch_or(uint64_t{1} << (s - stripes_), std::memory_order_release);
}

void Counters::raise_peak(int64_t now) {
  int64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
}

uint64_t Counters::window_peak(bool restart) {
  int64_t peak = restart
                     ? peak_.exchange(static_cast<int64_t>(live_bytes()), std::memory_order_relaxed)
                     : peak_.load(std::memory_order_relaxed);
  if (restart) {
    int64_t before = earlier_peak_.load(std::memory_order_relaxed);
    while (peak > before &&
           !earlier_peak_.compare_exchange_weak(before, peak, std::memory_order_relaxed)) {}
  }
  return peak > 0 ? static_cast<uint64_t>(peak) : 0;
}

uint64_t Counters::events() const {
  uint64_t n = 0;
  for (const Stripe &s : stripes_) n += s.events.load(std::memory_order_relaxed);
  return n;
}

uint64_t Counters::live_bytes() const {
  int64_t pending = 0;
  for (const Stripe &s : stripes_) pending += s.pending.load(std::memory_order_relaxed);
  int64_t live = live_.load(std::memory_order_relaxed) + pending;
  return live > 0 ? static_cast<uint64_t>(live) : 0;
}

double Counters::self_seconds() const {
  uint64_t n = 0;
  for (const Stripe &s : stripes_) n += s.self_ns.load(std::memory_order_relaxed);
  return static_cast<double>(n) / 1e9;
}

void Counters::reset() {
  for (Stripe &s : stripes_) {
    s.events.store(0, std::memory_order_relaxed);
    s.self_ns.store(0, std::memory_order_relaxed);
    s.pending.store(0, std::memory_order_relaxed);
  }
  live_.store(0, std::memory_order_relaxed);
  peak_.store(0, std::memory_order_relaxed);
  earlier_peak_.store(0, std::memory_order_relaxed);
}

// Constant-initialised and trivially destructible: no guard on the hot
// path, usable by threads still allocating during exit.
constinit Counters g_counters;

}  // namespace torchseal
