#include "counters.h"

#include <pthread.h>

#include <new>

namespace torchseal {

__thread Counters::Mine Counters::t_mine;

namespace {
std::atomic<uint32_t> g_next_stripe{1};
pthread_key_t g_exit_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

void on_thread_exit(void *stripe) { g_counters.fold(*static_cast<Counters::Stripe *>(stripe)); }
void make_key() { pthread_key_create(&g_exit_key, on_thread_exit); }
}  // namespace

void Counters::fold(Stripe &s) {
  int64_t d = s.pending.exchange(0, std::memory_order_relaxed);
  if (d) add_global(d);
}

// The first threads own a stripe each and count with a plain load and
// store: no locked instruction on the hot path. Later threads share
// stripe 0 and must add atomically.
Counters::Mine &Counters::claim_stripe() {
  uint32_t id = g_next_stripe.fetch_add(1, std::memory_order_relaxed);
  bool owned = id < kStripes;
  t_mine.owned = owned;
  t_mine.stripe = &stripes_[owned ? id : 0];
  if (owned) {
    pthread_once(&g_key_once, make_key);
    pthread_setspecific(g_exit_key, t_mine.stripe);
  }
  return t_mine;
}

void Counters::raise_peak(uint64_t now) {
  uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

uint64_t Counters::events() const {
  uint64_t n = 0;
  for (const Stripe &s : stripes_) n += s.events.load(std::memory_order_relaxed);
  return n;
}

uint64_t Counters::live_bytes() const {
  int64_t pending = 0;
  for (const Stripe &s : stripes_) pending += s.pending.load(std::memory_order_relaxed);
  return live_.load(std::memory_order_relaxed) + static_cast<uint64_t>(pending);
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
}

// Constant-initialised and trivially destructible: no guard on the hot
// path, usable by threads still allocating during exit.
constinit Counters g_counters;

}  // namespace torchseal
