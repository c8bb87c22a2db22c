#include "shim/core/unwind/unwinder.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <pthread.h>

#include <atomic>
#include <cstring>

#include "shim/core/ip_hash.h"
#include "shim/core/unwind/frame_rules.h"
#include "shim/core/unwind/rule_learner.h"
#include "shim/runtime/log.h"

namespace torchseal {
namespace {

using unwind::FrameRule;
using unwind::g_rules;
using unwind::RuleKind;

using UnwBacktrace = int (*)(void **, int);
using UnwSetCachingPolicy = int (*)(void *, int);
using UnwSetCacheSize = int (*)(void *, size_t, int);

UnwBacktrace g_unw_backtrace = nullptr;
UnwindMode g_mode = UnwindMode::Libunwind;
// The rule walker is usable (libunwind found, mode allows, not given up).
std::atomic<bool> g_fast{false};

std::atomic<uint64_t> g_learned{0};
std::atomic<uint64_t> g_fallbacks{0};
std::atomic<uint64_t> g_checked{0};
std::atomic<uint64_t> g_mismatches{0};

// Address range of libtorchseal's executable segments: frames in it are ours.
uintptr_t g_self_lo = 0, g_self_hi = 0;

int find_self(struct dl_phdr_info *info, size_t, void *data) {
  auto probe = reinterpret_cast<uintptr_t>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (probe >= lo && probe < hi) {
      g_self_lo = lo;
      g_self_hi = hi;
      return 1;
    }
  }
  return 0;
}

bool is_self(uint64_t ip) { return ip >= g_self_lo && ip < g_self_hi; }

// libunwind's UNW_CACHE_PER_THREAD; spelled out so we need no link-time dep.
constexpr int kCachePerThread = 2;

// Top of this thread's stack: every load the walker makes lies in
// [current rsp, top), so a wrong rule yields a wrong frame, never a fault.
thread_local uint64_t t_stack_hi __attribute__((tls_model("initial-exec"))) = 0;

uint64_t stack_top() {
  if (t_stack_hi) return t_stack_hi;
  pthread_attr_t attr;
  uint64_t hi = 1;  // unknown: every walk falls back
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void *addr = nullptr;
    size_t size = 0;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0 && addr)
      hi = reinterpret_cast<uint64_t>(addr) + size;
    pthread_attr_destroy(&attr);
  }
  t_stack_hi = hi;
  return hi;
}

uint64_t load(uint64_t addr) { return *reinterpret_cast<const uint64_t *>(addr); }

// Applies a Step rule to the frame (ip, rsp, rbp). Returns 1 (stepped),
// 0 (no caller) or -1 (a load would leave this thread's stack).
inline __attribute__((always_inline)) int apply(const FrameRule &r, uint64_t &ip, uint64_t &rsp,
                                                uint64_t &rbp, uint64_t hi) {
  uint64_t cfa = (r.rbp_base ? rbp : rsp) + static_cast<uint64_t>(r.cfa_off);
  if (cfa <= rsp || cfa > hi) return -1;
  uint64_t next_rbp = rbp;
  if (r.rbp_off) {
    uint64_t at = cfa + static_cast<uint64_t>(static_cast<int64_t>(r.rbp_off));
    if (at < rsp || at + 8 > hi) return -1;
    next_rbp = load(at);
  }
  ip = load(cfa - 8);
  rsp = cfa;
  rbp = next_rbp;
  return ip ? 1 : 0;
}

struct Frame {
  uint64_t ip, rsp, rbp;
};

// One step from frame `f` to its caller by its rule, learned first if
// needed. Returns as apply(), or -1 when libunwind must walk. Out of line,
// on a copy: the common steps never get here, and the walker's registers
// are never spilled for it.
__attribute__((noinline)) int general_step(Frame &f, uint64_t hi) {
  uint64_t v = g_rules.find(f.ip);
  FrameRule r;
  if (v) {
    r = FrameRule::unpack(v);
  } else {
    r = unwind::learn_rule(f.ip, f.rsp, f.rbp, hi);
    g_rules.insert(f.ip, r.pack());
    g_learned.fetch_add(1, std::memory_order_relaxed);
  }
  if (r.kind == RuleKind::End) return 0;
  if (r.kind != RuleKind::Step) return -1;
  return apply(r, f.ip, f.rsp, f.rbp, hi);
}

// A step by any rule but the frame-pointer one: the one in the home slot
// (`key` 0: it is ip's) inline, anything else by general_step.
inline __attribute__((always_inline)) int other_step(unwind::RuleTable::Table table, uint64_t i,
                                                     uint64_t key, uint64_t &ip, uint64_t &rsp,
                                                     uint64_t &rbp, uint64_t hi) {
  if (key == 0) {
    uint64_t v = unwind::RuleTable::rule_at(table, i);
    if ((v & 0xff) == static_cast<uint64_t>(RuleKind::Step))
      return apply(FrameRule::unpack(v), ip, rsp, rbp, hi);
    if ((v & 0xff) == static_cast<uint64_t>(RuleKind::End)) return 0;  // every walk's last
  }
  Frame f{ip, rsp, rbp};
  int r = general_step(f, hi);
  ip = f.ip;
  rsp = f.rsp;
  rbp = f.rbp;
  return r;
}

// Walks from its own caller outwards. Returns the frames kept (leading
// torchseal frames skipped) and their hash, or -1 when libunwind must do
// this capture.
__attribute__((noinline)) int fast_walk(uint64_t *out, int max, uint64_t *hash) {
  const auto *fp = static_cast<const uint64_t *>(__builtin_frame_address(0));
  uint64_t hi = stack_top();
  uint64_t rsp = reinterpret_cast<uint64_t>(fp) + 16;
  // On another stack (sigaltstack, a coroutine): bounds unknown.
  if (rsp >= hi || hi - rsp > (uint64_t{1} << 32)) return -1;
  uint64_t ip = fp[1], rbp = fp[0];
  unwind::RuleTable::Table table = g_rules.table();
  // torchseal's own frames: the shim is built with frame pointers, so they
  // need no rule.
  for (int self = 0; is_self(ip); ++self) {
    uint64_t cfa = rbp + 16;
    if (self == kCaptureSlack || cfa <= rsp || cfa > hi) return -1;
    ip = load(rbp + 8);
    rsp = cfa;
    rbp = load(rbp);
  }
  // Pointers rather than a count and a limit: the loop then fits in
  // registers (the count and limit were spilled to the stack).
  uint64_t *p = out, *const end = out + max;
  IpHasher h;
  for (;;) {
    *p++ = ip;
    h.add(ip);
    if (p == end) break;
    uint64_t i = unwind::RuleTable::index(ip);
    // The home slot's key xor ip: ~0 names the frame-pointer rule, 0 another
    // rule of ip's; the frame-pointer step is the loop's own body.
    uint64_t key = unwind::RuleTable::key_at(table, i) ^ ip;
    if (__builtin_expect(key == ~uint64_t{0}, 1)) {
      // apply() specialised: both loads are within 16 bytes below the
      // checked CFA, so inside the stack mapping.
      uint64_t cfa = rbp + 16;
      if (cfa <= rsp || cfa > hi) return -1;
      ip = load(rbp + 8);
      rsp = cfa;
      rbp = load(rbp);
      if (!ip) break;
      continue;
    }
    int r = other_step(table, i, key, ip, rsp, rbp, hi);
    if (r < 0) return -1;
    if (r == 0) break;
  }
  int n = static_cast<int>(p - out);
  *hash = h.finish(n);
  return n;
}

const uint64_t *libunwind_capture(uint64_t (&buf)[kCaptureBufFrames], int max, int *n_out) {
  int want = max + kCaptureSlack;
  if (want > kCaptureBufFrames) want = kCaptureBufFrames;
  auto *raw = reinterpret_cast<void **>(buf);
  int n = g_unw_backtrace ? g_unw_backtrace(raw, want) : backtrace(raw, want);
  int i = 0;
  while (i < n && is_self(buf[i])) ++i;
  int k = n - i;
  *n_out = k < max ? k : max;
  return buf + i;
}

void check_against_libunwind(const uint64_t *fast, int n, int max) {
  uint64_t ref[kCaptureBufFrames];
  int m;
  const uint64_t *r = libunwind_capture(ref, max, &m);
  g_checked.fetch_add(1, std::memory_order_relaxed);
  if (m == n && memcmp(r, fast, static_cast<size_t>(n) * sizeof(uint64_t)) == 0) return;
  if (g_mismatches.fetch_add(1, std::memory_order_relaxed) == 0) {
    int at = 0;
    while (at < n && at < m && fast[at] == r[at]) ++at;
    log::warn(
        "unwind check: first differing stack: fast walker %d frames, libunwind %d; "
        "frame %d is %#llx vs %#llx",
        n, m, at, static_cast<unsigned long long>(at < n ? fast[at] : 0),
        static_cast<unsigned long long>(at < m ? r[at] : 0));
  }
}

}  // namespace

const char *unwinder_init(UnwindMode mode) {
  dl_iterate_phdr(find_self, reinterpret_cast<void *>(&unwinder_init));
  g_mode = mode;
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    g_unw_backtrace = reinterpret_cast<UnwBacktrace>(dlsym(h, "unw_backtrace"));
    auto policy = reinterpret_cast<UnwSetCachingPolicy>(dlsym(h, "_ULx86_64_set_caching_policy"));
    auto cache_size = reinterpret_cast<UnwSetCacheSize>(dlsym(h, "_ULx86_64_set_cache_size"));
    auto as = reinterpret_cast<void **>(dlsym(h, "_ULx86_64_local_addr_space"));
    if (policy && as) policy(*as, kCachePerThread);
    if (cache_size && as) cache_size(*as, 1024, 0);
    g_fast.store(mode != UnwindMode::Libunwind && g_unw_backtrace && unwind::learner_init(h) &&
                 g_rules.reserve());
  }
  if (g_fast.load())
    return mode == UnwindMode::Check ? "learned rules, checked against libunwind"
                                     : "learned rules + libunwind";
  if (g_unw_backtrace) return "libunwind";
  // Warm up glibc's backtrace() (it dlopens libgcc_s on first use).
  void *warm[2];
  backtrace(warm, 2);
  return "glibc backtrace";
}

const uint64_t *capture_stack_inplace(uint64_t (&buf)[kCaptureBufFrames], int max, int *n_out,
                                      uint64_t *hash) {
  static_assert(sizeof(void *) == sizeof(uint64_t));
  if (g_fast.load(std::memory_order_relaxed)) {
    int want = max < kCaptureBufFrames ? max : kCaptureBufFrames;
    int n = fast_walk(buf, want, hash);
    if (n >= 0) {
      if (g_mode == UnwindMode::Check) check_against_libunwind(buf, n, want);
      *n_out = n;
      return buf;
    }
    g_fallbacks.fetch_add(1, std::memory_order_relaxed);
  }
  const uint64_t *ips = libunwind_capture(buf, max, n_out);
  *hash = hash_ips(ips, *n_out);
  return ips;
}

int capture_stack(uint64_t *out, int max) {
  uint64_t buf[kCaptureBufFrames];
  int n;
  uint64_t hash;
  const uint64_t *ips = capture_stack_inplace(buf, max, &n, &hash);
  memcpy(out, ips, static_cast<size_t>(n) * sizeof(uint64_t));
  return n;
}

void unwinder_code_unloaded() {
  if (g_fast.load() && !g_rules.clear()) {
    // Many unloads (each retires a table): stop learning, walk with libunwind.
    g_fast.store(false);
    log::warn(
        "unwinder: code was unloaded too often to keep learned frame rules; stacks are "
        "walked by libunwind from now on");
  }
}

void unwinder_after_fork() { g_rules.reset_lock_after_fork(); }

void unwinder_log_summary() {
  if (!g_fast.load() && !g_learned.load()) return;
  uint64_t fb = g_fallbacks.load(std::memory_order_relaxed);
  if (g_mode == UnwindMode::Check) {
    uint64_t checked = g_checked.load(), bad = g_mismatches.load();
    // Warn level: it is the answer the user asked for with =check.
    log::warn(
        "unwind check: %llu stacks compared with libunwind, %llu differed; %llu walked "
        "by libunwind alone; %llu frame rules learned",
        static_cast<unsigned long long>(checked), static_cast<unsigned long long>(bad),
        static_cast<unsigned long long>(fb), static_cast<unsigned long long>(g_learned.load()));
  } else {
    log::info("unwinder: %llu stacks handed to libunwind; %llu frame rules learned",
              static_cast<unsigned long long>(fb),
              static_cast<unsigned long long>(g_learned.load()));
  }
}

}  // namespace torchseal
