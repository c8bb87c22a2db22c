#include "shim/core/fast_clock.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace torchseal {
namespace clock_detail {

Line g_line;
std::atomic<int> g_mode{kUnknown};
__thread ThreadLines t_lines __attribute__((tls_model("initial-exec")));
std::atomic<bool> g_updating{false};

namespace {

constexpr uint64_t kCalibrateNs = 10'000'000;  // first anchor after 10 ms
constexpr uint64_t kReanchorNs = 250'000'000;
// The slope may bend by at most 0.1% to close a gap.
constexpr double kMaxBend = 1e-3;

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

#if defined(__x86_64__)
uint64_t ticks() { return __rdtsc(); }

bool invariant_tsc() {
  unsigned a, b, c, d;
  if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007) return false;
  __get_cpuid(0x80000007, &a, &b, &c, &d);
  return d & (1u << 8);
}

// The kernel drops the TSC as its clocksource when it finds it unstable
// (across sockets, after a VM migration); follow its judgement.
bool kernel_uses_tsc() {
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[16] = {};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}
#else
uint64_t ticks() { return 0; }
bool invariant_tsc() { return false; }
bool kernel_uses_tsc() { return false; }
#endif

// The first sample, for a slope over an ever longer baseline.
uint64_t g_base_tsc = 0, g_base_ns = 0;

uint64_t on_line(uint64_t t, uint64_t atsc, uint64_t ans, uint64_t mult) {
  uint64_t d = t >= atsc ? t - atsc : 0;
  return ans + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * mult) >> 32);
}

void publish(const ThreadLine &l) {
  uint32_t s = g_line.seq.load(std::memory_order_relaxed);
  g_line.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  g_line.anchor_tsc.store(l.anchor_tsc, std::memory_order_relaxed);
  g_line.anchor_ns.store(l.anchor_ns, std::memory_order_relaxed);
  g_line.mult.store(l.mult, std::memory_order_relaxed);
  g_line.window.store(l.window, std::memory_order_relaxed);
  g_line.seq.store(s + 2, std::memory_order_release);
}

// A consistent copy of the shared line, or false while it is being
// published.
bool read_line(ThreadLine &c) {
  uint32_t s0 = g_line.seq.load(std::memory_order_acquire);
  c.anchor_tsc = g_line.anchor_tsc.load(std::memory_order_relaxed);
  c.anchor_ns = g_line.anchor_ns.load(std::memory_order_relaxed);
  c.mult = g_line.mult.load(std::memory_order_relaxed);
  c.window = g_line.window.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return !(s0 & 1) && g_line.seq.load(std::memory_order_relaxed) == s0;
}

// A new line through (t, ns) with `rate` ns per tick, due again in
// kReanchorNs.
void set_line(uint64_t t, uint64_t ns, double rate) {
  publish(ThreadLine{t, ns, static_cast<uint64_t>(rate * 4294967296.0),
                     static_cast<uint64_t>(kReanchorNs / rate)});
}

// Set while this thread writes a copy: a signal handler's stamp in between
// must not write one too (it would write the copy being written, or flip to
// it half written).
__thread bool t_copying __attribute__((tls_model("initial-exec")));

void copy_line(const ThreadLine &l) {
  if (t_copying) return;
  t_copying = true;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  uint32_t next = (__atomic_load_n(&t_lines.cur, __ATOMIC_RELAXED) & 1) ^ 1;
  t_lines.line[next] = l;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  __atomic_store_n(&t_lines.cur, next, __ATOMIC_RELAXED);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_copying = false;
}

// Re-anchors the line if it is due, under g_updating (so the line read
// here is the one being continued). The pair is read back to back; a
// preempted pair only bends the slope a little.
__attribute__((noinline)) bool maybe_reanchor() {
  if (g_updating.exchange(true, std::memory_order_acquire)) return false;
  uint64_t atsc = g_line.anchor_tsc.load(std::memory_order_relaxed);
  uint64_t ans = g_line.anchor_ns.load(std::memory_order_relaxed);
  uint64_t mult = g_line.mult.load(std::memory_order_relaxed);
  uint64_t ns = mono_ns();
  uint64_t t = ticks();
  if (t - atsc > g_line.window.load(std::memory_order_relaxed)) {
    double rate = static_cast<double>(ns - g_base_ns) / static_cast<double>(t - g_base_tsc);
    uint64_t here = on_line(t, atsc, ans, mult);
    double bend = static_cast<double>(static_cast<int64_t>(ns - here)) / kReanchorNs;
    if (bend > kMaxBend) bend = kMaxBend;
    if (bend < -kMaxBend) bend = -kMaxBend;
    set_line(t, here, rate * (1.0 + bend));
  }
  g_updating.store(false, std::memory_order_release);
  return true;
}

__attribute__((noinline)) uint64_t slow_now() {
  int mode = g_mode.load(std::memory_order_acquire);
  if (mode == kUnknown) {
    bool ok = invariant_tsc() && kernel_uses_tsc();
    int want = ok ? kCalibrating : kSyscall;
    if (ok && !g_updating.exchange(true, std::memory_order_acquire)) {
      if (g_mode.load() == kUnknown) {
        g_base_ns = mono_ns();
        g_base_tsc = ticks();
        g_mode.store(want, std::memory_order_release);
      }
      g_updating.store(false, std::memory_order_release);
    } else if (!ok) {
      g_mode.store(want, std::memory_order_release);
    }
    return mono_ns();
  }
  uint64_t ns = mono_ns();
  if (mode == kCalibrating && ns - g_base_ns >= kCalibrateNs &&
      !g_updating.exchange(true, std::memory_order_acquire)) {
    if (g_mode.load(std::memory_order_relaxed) == kCalibrating) {
      uint64_t t = ticks();
      double rate = static_cast<double>(ns - g_base_ns) / static_cast<double>(t - g_base_tsc);
      if (rate > 0 && rate < 100) {  // 10 MHz .. any real TSC
        set_line(t, ns, rate);
        g_mode.store(kTsc, std::memory_order_release);
      } else {
        g_mode.store(kSyscall, std::memory_order_release);
      }
    }
    g_updating.store(false, std::memory_order_release);
  }
  return ns;
}

}  // namespace

void after_fork_child() {
  // Only the forking thread goes on. Another thread of the parent may have
  // been re-anchoring: its flag would stay set (the line never re-anchored
  // again, only extrapolated), and a publish it had begun half done (every
  // stamp failing its reads into clock_gettime).
  g_updating.store(false, std::memory_order_relaxed);
  uint32_t s = g_line.seq.load(std::memory_order_relaxed);
  if (!(s & 1)) return;
  g_line.seq.store(s + 1, std::memory_order_relaxed);
  // Its fields may be of two lines; the slope is one word, of either: a new
  // line through now with it.
  uint64_t mult = g_line.mult.load(std::memory_order_relaxed);
  if (g_mode.load(std::memory_order_relaxed) == kTsc && mult)
    set_line(ticks(), mono_ns(), static_cast<double>(mult) / 4294967296.0);
}

uint64_t now_ns_slow() {
  if (g_mode.load(std::memory_order_acquire) != kTsc) return slow_now();
  // Bounded: a signal handler may have interrupted this very thread in the
  // middle of publish(), and that publish will not finish before we return.
  for (int tries = 0; tries < 64; ++tries) {
    ThreadLine l;
    if (!read_line(l)) continue;
    uint64_t t = ticks();
    if (t - l.anchor_tsc > l.window) {
      if (maybe_reanchor()) continue;  // read the new line
      // Someone else re-anchoring (or the thread this signal handler
      // interrupted): the current line is still good for a while, but not
      // to be copied past its window.
      return on_line(t, l.anchor_tsc, l.anchor_ns, l.mult);
    }
    copy_line(l);
    return on_line(t, l.anchor_tsc, l.anchor_ns, l.mult);
  }
  return mono_ns();
}

}  // namespace clock_detail

using namespace clock_detail;

bool clock_uses_tsc() { return g_mode.load(std::memory_order_relaxed) == kTsc; }

}  // namespace torchseal
