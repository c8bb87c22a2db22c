// Process-wide counters that every event touches, striped by thread so
// concurrent threads do not bounce one cache line (and a thread that owns
// its stripe needs no locked add).
//
// Live bytes too: a thread keeps its net growth in its stripe and folds it
// into the global count once it reaches kFold (and when the thread exits).
// A net shrink is folded at once, so no stripe holds a negative share: a
// thread that frees what others allocated (stream-callback workers) would
// otherwise hide up to kFold of frees from the global count, and every
// allocating thread's peak check would count them as live. The peak is
// checked on every allocation against the global count plus the thread's
// own share: that sum is never above the true total, and equals it while
// one thread allocates, however many free; with several allocating threads
// it is within kFold per other one. One global counter written by every
// event was what kept 8 threads from scaling on 2 cores (bench/RESULTS.md).
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/core/fast_clock.h"

namespace torchseal {

class Counters {
 public:
  // Ends an event that started at `t0` (now_ns()): counts it, and its self
  // time exactly for a thread's first kSelfSample events, then on one event
  // in kSelfSample scaled by kSelfSample. The closing clock read was a
  // quarter of the shim's per-pair wall time (bench/RESULTS.md). Inline:
  // a thread that owns its stripe counts with plain loads and stores.
  __attribute__((always_inline)) inline void end_event(uint64_t t0);
  static constexpr uint32_t kSelfSample = 16;
  static constexpr int64_t kFold = int64_t{1} << 20;
  __attribute__((always_inline)) inline void add_live(int64_t delta);
  uint64_t events() const;
  double self_seconds() const;
  uint64_t live_bytes() const;
  // The process's peak, across every window (below).
  uint64_t peak_bytes() const {
    int64_t now = peak_.load(std::memory_order_relaxed);
    int64_t before = earlier_peak_.load(std::memory_order_relaxed);
    int64_t peak = now > before ? now : before;
    return peak > 0 ? static_cast<uint64_t>(peak) : 0;
  }
  // The peak since the last restart (or the start), for a caller that
  // measures one stretch of the program (a pytest test); restart=true then
  // starts a new window at the live bytes now. The hot path keeps checking
  // the one peak_ it always did: the process's peak is peak_ or the highest
  // window peak put aside here.
  uint64_t window_peak(bool restart);
  void reset();

  // Stripe 0 is shared by the threads alive beyond kStripes - 1; every other
  // stripe has one writer at a time (exited threads hand theirs on).
  static constexpr int kStripes = 64;
  struct alignas(64) Stripe {
    std::atomic<uint64_t> events{0};
    std::atomic<uint64_t> self_ns{0};
    std::atomic<int64_t> pending{0};  // live bytes not yet in live_ (owned stripes only)
  };
  // A thread's share goes to the global count (its exit, fork).
  void fold(Stripe &s);

  // Sends the calling thread's next counter updates to `fn(delta)` (delta:
  // the live-byte change of add_live, 0 for end_event) until it returns
  // true. The hot path pays nothing for it: the thread's stripe is parked,
  // so its updates take the unclaimed-stripe branch that already exists.
  // For rare events only (an OOM waiting for its retry).
  using WatchFn = bool (*)(int64_t delta);
  void watch_thread(WatchFn fn);
  // Called at the calling thread's exit: folds its share, frees its stripe.
  void release_stripe();

 private:
  struct Mine {
    Stripe *stripe;
    uint32_t events;  // this thread's, for the self-time sampling
    bool owned;
  };
  static __thread Mine t_mine __attribute__((tls_model("initial-exec")));
  static __thread Mine t_parked __attribute__((tls_model("initial-exec")));  // while watched
  static __thread WatchFn t_watch __attribute__((tls_model("initial-exec")));
  __attribute__((noinline)) Mine &claim_stripe(int64_t delta);
  Mine &claim_new_stripe();
  void raise_peak(int64_t now);
  // Signed: the global count alone runs below zero while other threads'
  // unfolded growth covers what this one freed (read as unsigned, the peak
  // once became 2^64 - 800000).
  __attribute__((noinline)) void add_global(int64_t delta) {
    int64_t now = live_.fetch_add(delta, std::memory_order_relaxed) + delta;
    if (delta > 0) check_peak(now);
  }
  // A signed comparison: a negative sum never beats the peak.
  void check_peak(int64_t now) {
    if (now > peak_.load(std::memory_order_relaxed)) raise_peak(now);
  }
  static void bump(std::atomic<uint64_t> &c, uint64_t by, bool owned) {
    if (owned)
      c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
    else
      c.fetch_add(by, std::memory_order_relaxed);
  }

  Stripe stripes_[kStripes];
  alignas(64) std::atomic<int64_t> live_{0};
  alignas(64) std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> earlier_peak_{0};  // highest closed window (window_peak)
};

extern Counters g_counters;
inline Counters &counters() { return g_counters; }

void Counters::end_event(uint64_t t0) {
  static_assert((kSelfSample & (kSelfSample - 1)) == 0);
  Mine &m = t_mine.stripe ? t_mine : claim_stripe(0);
  uint32_t n = ++m.events;
  bump(m.stripe->events, 1, m.owned);
  if (n <= kSelfSample)
    bump(m.stripe->self_ns, now_ns() - t0, m.owned);
  else if ((n & (kSelfSample - 1)) == 0)
    bump(m.stripe->self_ns, (now_ns() - t0) * kSelfSample, m.owned);
}

void Counters::add_live(int64_t delta) {
  Mine &m = t_mine.stripe ? t_mine : claim_stripe(delta);
  if (!m.owned) return add_global(delta);
  int64_t d = m.stripe->pending.load(std::memory_order_relaxed) + delta;
  if (d >= kFold || d < 0) {
    m.stripe->pending.store(0, std::memory_order_relaxed);
    return add_global(d);
  }
  m.stripe->pending.store(d, std::memory_order_relaxed);
  if (delta > 0) check_peak(live_.load(std::memory_order_relaxed) + d);
}

}  // namespace torchseal
