// Process-wide counters that every event touches. Events and self-time are
// striped by thread so concurrent threads do not bounce one cache line (and
// a thread that owns its stripe needs no locked add); live bytes and the
// peak need one global view and stay single atomics.
#pragma once

#include <atomic>
#include <cstdint>

#include "fast_clock.h"

namespace torchseal {

class Counters {
 public:
  void add_event(uint64_t self_ns);
  // Ends an event that started at `t0` (now_ns()): counts it, and its self
  // time exactly for a thread's first kSelfSample events, then on one event
  // in kSelfSample scaled by kSelfSample. The closing clock read was a
  // quarter of the shim's per-pair wall time (bench/RESULTS.md).
  void end_event(uint64_t t0);
  static constexpr uint32_t kSelfSample = 16;
  void add_live(int64_t delta);
  uint64_t events() const;
  double self_seconds() const;
  uint64_t live_bytes() const { return live_.load(std::memory_order_relaxed); }
  uint64_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  void reset();

  // Stripe 0 is shared by threads past the first kOwnedStripes - 1; every
  // other stripe has one writer.
  static constexpr int kStripes = 64;
  static constexpr uint32_t kOwnedStripes = kStripes;
  struct alignas(64) Stripe {
    std::atomic<uint64_t> events{0};
    std::atomic<uint64_t> self_ns{0};
  };

 private:
  Stripe stripes_[kStripes];
  alignas(64) std::atomic<uint64_t> live_{0};
  alignas(64) std::atomic<uint64_t> peak_{0};
};

extern Counters g_counters;
inline Counters &counters() { return g_counters; }

}  // namespace torchseal
