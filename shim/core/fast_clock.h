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
// The line ns = anchor_ns + (tsc - anchor_tsc) * mult / 2^32, good for
// `window` ticks past its anchor, published under a sequence count.
struct Line {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint64_t> anchor_tsc{0}, anchor_ns{0}, mult{0}, window{0};
};
extern Line g_line;
extern std::atomic<int> g_mode;

// Each thread reads the line it last copied: its words sit in the thread's
// own block, with no sequence to check (the shared line cost five loads and
// two checks a stamp; bench/RESULTS.md). The copy is as good as the shared
// line: a line is only ever replaced by one anchored past its window, so a
// tick inside a copy's window maps as the shared line mapped it. window == 0:
// no copy yet.
struct ThreadLine {
  uint64_t anchor_tsc, anchor_ns, mult, window;
};
// Two copies: a new one is written into the copy not in use, then `cur`
// flips. A signal handler whose stamp makes a new copy (a re-anchor came
// due) between a stamp's loads of the old copy leaves those words alone; one
// copy, rewritten in place, let a stamp mix two lines' words (250 ms wrong,
// once under load in CI's shim_unit).
struct ThreadLines {
  ThreadLine line[2];
  uint32_t cur;
};
extern __thread ThreadLines t_lines __attribute__((tls_model("initial-exec")));
// The copy stamps read now.
inline const ThreadLine &thread_line() {
  return t_lines.line[__atomic_load_n(&t_lines.cur, __ATOMIC_RELAXED) & 1];
}
// Set by the thread re-anchoring the line (or calibrating).
extern std::atomic<bool> g_updating;

// Everything but a stamp inside this thread's copy: calibration, the syscall
// clock, the copy (re)made, a re-anchor that is due.
uint64_t now_ns_slow();
}  // namespace clock_detail

// Inline, with every rare case out of line: the caller keeps its registers
// (two reads per alloc+free pair; bench/RESULTS.md).
inline uint64_t now_ns() {
#if defined(__x86_64__)
  using namespace clock_detail;
  const ThreadLine &l = thread_line();
  // Unsigned: a TSC behind the anchor (another CPU's) is outside too.
  uint64_t d = __rdtsc() - l.anchor_tsc;
  if (d <= l.window)
    return l.anchor_ns + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * l.mult) >> 32);
#endif
  return clock_detail::now_ns_slow();
}

// Whether now_ns() reads the TSC (false: clock_gettime on every call).
bool clock_uses_tsc();

// Child side of fork: frees the line from a re-anchor another thread of the
// parent was making.
namespace clock_detail {
void after_fork_child();
}

}  // namespace torchseal
