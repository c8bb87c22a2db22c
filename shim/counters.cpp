#include "counters.h"

#include <new>

namespace torchseal {

__thread Counters::Mine Counters::t_mine;

namespace {
std::atomic<uint32_t> g_next_stripe{1};
}  // namespace

// The first threads own a stripe each and count with a plain load and
// store: no locked instruction on the hot path. Later threads share
// stripe 0 and must add atomically.
Counters::Mine &Counters::claim_stripe() {
  uint32_t id = g_next_stripe.fetch_add(1, std::memory_order_relaxed);
  bool owned = id < kStripes;
  t_mine.owned = owned;
  t_mine.stripe = &stripes_[owned ? id : 0];
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

double Counters::self_seconds() const {
  uint64_t n = 0;
  for (const Stripe &s : stripes_) n += s.self_ns.load(std::memory_order_relaxed);
  return static_cast<double>(n) / 1e9;
}

void Counters::reset() {
  for (Stripe &s : stripes_) {
    s.events.store(0, std::memory_order_relaxed);
    s.self_ns.store(0, std::memory_order_relaxed);
  }
  live_.store(0, std::memory_order_relaxed);
  peak_.store(0, std::memory_order_relaxed);
}

// Constant-initialised and trivially destructible: no guard on the hot
// path, usable by threads still allocating during exit.
constinit Counters g_counters;

}  // namespace torchseal
