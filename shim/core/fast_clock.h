// Event timestamps: CLOCK_MONOTONIC nanoseconds, read from the TSC when the
// kernel itself trusts it. clock_gettime costs ~50-65 ns on the VMs we
// measure on and every event needs a stamp (two per alloc+free pair); rdtsc
// plus a scale is ~20 ns (bench/RESULTS.md).
//
// The scale is calibrated against clock_gettime (which stays in use for the
// first 10 ms) and re-anchored about every 250 ms by whichever thread reads
// the clock then: each new anchor continues the old line (no step) and bends
// the slope by at most 0.1% to close the remaining gap. It tracks
// CLOCK_MONOTONIC to within microseconds; a thread preempted across a
// re-anchor may see time step back by 0.1% of the preemption.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace torchseal {

namespace clock_detail {
enum : int { kUnknown = 0, kCalibrating = 1, kTsc = 2, kSyscall = 3 };
// The line ns = anchor_ns + (tsc - anchor_tsc) * mult / 2^32, published
// under a sequence count.
struct Line {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint64_t> anchor_tsc{0}, anchor_ns{0}, mult{0};
};
extern Line g_line;
extern std::atomic<int> g_mode;
extern std::atomic<uint64_t> g_reanchor_ticks;
// Everything but a plain read of a settled line: calibration, the syscall
// clock, a line being published, a re-anchor that is due.
uint64_t now_ns_slow();

struct LineCopy {
  uint64_t anchor_tsc, anchor_ns, mult;
};
// A consistent copy of the line, or false while it is being published.
inline bool read_line(LineCopy &c) {
  uint32_t s0 = g_line.seq.load(std::memory_order_acquire);
  c.anchor_tsc = g_line.anchor_tsc.load(std::memory_order_relaxed);
  c.anchor_ns = g_line.anchor_ns.load(std::memory_order_relaxed);
  c.mult = g_line.mult.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return !(s0 & 1) && g_line.seq.load(std::memory_order_relaxed) == s0;
}
}  // namespace clock_detail

// Inline, with every rare case out of line: the caller keeps its registers
// (two reads per alloc+free pair; bench/RESULTS.md).
inline uint64_t now_ns() {
#if defined(__x86_64__)
  using namespace clock_detail;
  LineCopy l;
  if (g_mode.load(std::memory_order_acquire) == kTsc && read_line(l)) {
    // Unsigned: a TSC behind the anchor (another CPU's) is "due" too.
    uint64_t d = __rdtsc() - l.anchor_tsc;
    if (d <= g_reanchor_ticks.load(std::memory_order_relaxed))
      return l.anchor_ns +
             static_cast<uint64_t>((static_cast<unsigned __int128>(d) * l.mult) >> 32);
  }
#endif
  return clock_detail::now_ns_slow();
}

// Whether now_ns() reads the TSC (false: clock_gettime on every call).
bool clock_uses_tsc();

}  // namespace torchseal
