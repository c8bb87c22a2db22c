#include "counters.h"

#include <new>

namespace torchseal {

namespace {
thread_local uint32_t t_stripe __attribute__((tls_model("initial-exec"))) = 0;
thread_local uint32_t t_events __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<uint32_t> g_next_stripe{1};

uint32_t my_stripe() {
  if (!t_stripe) t_stripe = g_next_stripe.fetch_add(1, std::memory_order_relaxed);
  return t_stripe;
}

// The first threads own a stripe each and count with a plain load and
// store: no locked instruction on the hot path. Later threads share the
// remaining stripe and must add atomically.
void bump(std::atomic<uint64_t> &c, uint64_t by, bool owned) {
  if (owned)
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  else
    c.fetch_add(by, std::memory_order_relaxed);
}

Counters::Stripe &stripe_of(Counters::Stripe *stripes, bool *owned) {
  uint32_t id = my_stripe();
  *owned = id < Counters::kOwnedStripes;
  return stripes[*owned ? id : 0];
}
}  // namespace

void Counters::add_event(uint64_t self_ns) {
  bool owned;
  Stripe &s = stripe_of(stripes_, &owned);
  bump(s.events, 1, owned);
  bump(s.self_ns, self_ns, owned);
}

void Counters::end_event(uint64_t t0) {
  static_assert((kSelfSample & (kSelfSample - 1)) == 0);
  uint32_t n = ++t_events;
  bool owned;
  Stripe &s = stripe_of(stripes_, &owned);
  bump(s.events, 1, owned);
  if (n <= kSelfSample)
    bump(s.self_ns, now_ns() - t0, owned);
  else if ((n & (kSelfSample - 1)) == 0)
    bump(s.self_ns, (now_ns() - t0) * kSelfSample, owned);
}

void Counters::add_live(int64_t delta) {
  uint64_t now = live_.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed) +
                 static_cast<uint64_t>(delta);
  if (delta <= 0) return;
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
