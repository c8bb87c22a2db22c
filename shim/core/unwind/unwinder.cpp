#include "shim/core/unwind/unwinder.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <atomic>
#include <cstring>

#include <algorithm>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "common/symbols/runtime_libs.h"
#include "common/util/log.h"
#include "shim/core/activation.h"
#include "shim/core/ip_hash.h"
#include "shim/core/loader_walk.h"
#include "shim/core/thread_heap.h"
#include "shim/core/unwind/frame_rules.h"
#include "shim/core/unwind/rule_learner.h"

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
                                                uint64_t &rbp, uint64_t hi, uint64_t &rbp_src,
                                                bool &rbp_in) {
  uint64_t cfa = (r.rbp_base ? rbp : rsp) + static_cast<uint64_t>(r.cfa_off);
  if (cfa <= rsp || cfa > hi) return -1;
  uint64_t next_rbp = rbp;
  rbp_src = 0;
  rbp_in = r.rbp_base;
  if (r.rbp_off) {
    uint64_t at = cfa + static_cast<uint64_t>(static_cast<int64_t>(r.rbp_off));
    if (at < rsp || at + 8 > hi) return -1;
    next_rbp = load(at);
    rbp_src = at;
  }
  ip = load(cfa - 8);
  rsp = cfa;
  rbp = next_rbp;
  return ip ? 1 : 0;
}

struct Frame {
  uint64_t ip, rsp, rbp;
  uint64_t rbp_src = 0;  // where the step loaded the caller's rbp (0: kept)
  bool rbp_in = true;    // the step read this frame's rbp (as its CFA's base)
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
    // Not kept (the probe run is full): libunwind walks this stack, as the
    // table's contract says, rather than a rule learned afresh each time
    // from this frame's registers (the memo assumes one rule an address).
    if (!g_rules.insert(f.ip, r.pack())) return -1;
    g_learned.fetch_add(1, std::memory_order_relaxed);
  }
  if (r.kind == RuleKind::End) {
    f.rbp_in = false;  // reads nothing: the frame's rbp is no later step's
    return 0;
  }
  if (r.kind != RuleKind::Step) return -1;
  return apply(r, f.ip, f.rsp, f.rbp, hi, f.rbp_src, f.rbp_in);
}

// A step by any rule but the frame-pointer one: the one in the home slot
// (`key` 0: it is ip's) inline, anything else by general_step.
inline __attribute__((always_inline)) int other_step(unwind::RuleTable::Table table, uint64_t i,
                                                     uint64_t key, uint64_t &ip, uint64_t &rsp,
                                                     uint64_t &rbp, uint64_t hi, uint64_t &rbp_src,
                                                     bool &rbp_in) {
  if (key == 0) {
    uint64_t v = unwind::RuleTable::rule_at(table, i);
    if ((v & 0xff) == static_cast<uint64_t>(RuleKind::Step))
      return apply(FrameRule::unpack(v), ip, rsp, rbp, hi, rbp_src, rbp_in);
    if ((v & 0xff) == static_cast<uint64_t>(RuleKind::End)) return 0;  // every walk's last
  }
  Frame f{ip, rsp, rbp};
  int r = general_step(f, hi);
  ip = f.ip;
  rsp = f.rsp;
  rbp = f.rbp;
  rbp_src = f.rbp_src;
  rbp_in = f.rbp_in;
  return r;
}

// The last walk of this thread, frame by frame, so the next one can stop
// walking where it reaches a frame of it: a step is a function of the frame
// (ip, rsp, rbp), the rule of ip and the words it loads, so when the words
// at the loaded addresses still hold what they held, every frame from there
// out is the one the walk would find again. Checking a frame costs a load
// or two and a compare where stepping it costs a rule-table probe and the
// rule: a loop allocating from one place re-walks only its innermost
// frames (heaptrack's trace tree saves the same work by interning).
// Two buffers: the walk records into one while it matches against the
// other. Rules change only when code is unloaded, which bumps g_memo_gen.
//
// The words are checked from two lists made when the walk is recorded: a
// frame-pointer step loaded the saved rbp and the return address side by
// side, one 16-byte compare; any other step's words (the return address,
// a saved rbp some frame needs) one at a time, four instructions each (a
// single list of masked 16-byte compares cost seven and a half). Every
// address is known before the first load, so the loads are independent (no
// chase through rbp), and nothing branches per frame.
constexpr int kMemoFrames = 128;
using WordPair = uint64_t __attribute__((vector_size(16)));
struct PairCheck {
  WordPair want;  // saved rbp, return address
  uint64_t addr;  // of the saved rbp
};
struct WordCheck {
  uint64_t addr, want;
};
struct WalkMemo {
  uint64_t ip[kMemoFrames], rsp[kMemoFrames], rbp[kMemoFrames];
  uint64_t rbp_src[kMemoFrames];  // where the step from frame k loaded rbp(k+1); 0: kept
  bool rbp_read[kMemoFrames];     // that step read frame k's rbp (a CFA based on it)
  // Some step from frame k outwards reads frame k's rbp: it is read at k, or
  // kept into a frame that reads it. Only then does a match at k need the
  // same rbp: code built without frame pointers uses rbp as one more
  // register, whose value changes from call to call (static cudart's frames
  // under the driver hooks: every walk missed the memo, bench/RESULTS.md).
  bool rbp_in[kMemoFrames];
  int n = 0;                      // frames recorded; 0: nothing to match
  uint64_t end_src = 0;           // the walk ended on a loaded 0 return address here (0: by a rule)
  bool whole = false;             // the walk ended by itself, not at `max`
  uint64_t gen = 0;
  uint64_t hash = 0;  // hash_ips() of ip[0..n)
  // The checks of the steps from frame k outwards: pair[first_pair[k] ..
  // npairs) and word[first_word[k] .. nwords).
  PairCheck pair[kMemoFrames];
  WordCheck word[2 * kMemoFrames + 1];
  uint16_t first_pair[kMemoFrames], first_word[kMemoFrames];
  int npairs = 0, nwords = 0;
};
std::atomic<uint64_t> g_memo_gen{1};
// Walks that ended in the memo, of threads that have exited (each thread
// counts its own: a shared counter cost a locked add on every walk).
std::atomic<uint64_t> g_memo_reused{0};
// Of those, the stack whole again (same_as_last(): no step, no copy).
std::atomic<uint64_t> g_memo_same{0};
struct MemoPair {
  WalkMemo buf[2];
  int cur = 0;
  uint64_t reused = 0;  // this thread's walks that ended in the memo
  uint64_t same = 0;    // of which the stack whole again
  ~MemoPair() {
    g_memo_reused.fetch_add(reused, std::memory_order_relaxed);
    g_memo_same.fetch_add(same, std::memory_order_relaxed);
  }
};
using ThreadMemo = ThreadHeap<MemoPair>;
// Set while this thread walks: a walk nested in it (a signal handler's) must
// not touch the buffers the outer one reads.
thread_local bool t_walking __attribute__((tls_model("initial-exec"))) = false;

// Frames m.. of `w` still hold: every word their steps loaded is unchanged.
inline bool memo_holds(const WalkMemo &w, int m) {
  // Four at a time, into two sums: fewer of the loop's own instructions.
  uint64_t a = 0, b = 0;
  const WordCheck *c = w.word + w.first_word[m], *const end = w.word + w.nwords;
  for (; c + 3 < end; c += 4) {
    a |= (load(c[0].addr) ^ c[0].want) | (load(c[2].addr) ^ c[2].want);
    b |= (load(c[1].addr) ^ c[1].want) | (load(c[3].addr) ^ c[3].want);
    // Kept scalar: GCC's vectorised loop shuffled the words into vector
    // registers, five instructions a word against four.
    asm("" : "+r"(a), "+r"(b));
  }
  for (; c < end; ++c) a |= load(c->addr) ^ c->want;
  WordPair d = {a | b, 0};
  for (const PairCheck *p = w.pair + w.first_pair[m], *const pend = w.pair + w.npairs; p < pend;
       ++p) {
    WordPair now;
    memcpy(&now, reinterpret_cast<const void *>(p->addr), sizeof now);
    d |= now ^ p->want;
  }
  return (d[0] | d[1]) == 0;
}

// The checks of the steps from frames [0, k), appended in frame order, then
// those of `tail`'s frames from tail_from on (the memo a walk ended in) for
// w's frames [k, n): all of them, or, when w stops short of tail's last
// frame (a walk cut at max), those of the steps between its frames. Step j
// reached frame j + 1; a saved rbp that no frame needs goes unchecked: such
// code saved a register that held a loop counter, not a frame pointer.
// First, which of frames [0, k) need their rbp for the walk outwards, given
// frame k's need `outer` (false past the last frame). (Frames copied from
// `tail` keep its rbp needs: a longer walk's, at least as strict.)
inline void make_checks(WalkMemo &w, int k, bool outer, const WalkMemo *tail, int tail_from) {
  for (int j = k - 1; j >= 0; --j) {
    outer = w.rbp_read[j] || (w.rbp_src[j] == 0 && outer);
    w.rbp_in[j] = outer;
  }
  for (int j = 0; j < k; ++j) {
    w.first_pair[j] = static_cast<uint16_t>(w.npairs);
    w.first_word[j] = static_cast<uint16_t>(w.nwords);
    if (j + 1 >= w.n) {  // the last frame: what ended the walk
      if (w.end_src) w.word[w.nwords++] = {w.end_src, 0};
      break;
    }
    uint64_t src = w.rbp_src[j], rsp = w.rsp[j + 1], ip = w.ip[j + 1];
    bool need = w.rbp_in[j + 1];
    if (src && src == rsp - 16 && need) {
      w.pair[w.npairs++] = {WordPair{w.rbp[j + 1], ip}, rsp - 16};
      continue;
    }
    w.word[w.nwords++] = {rsp - 8, ip};
    if (src && need) w.word[w.nwords++] = {src, w.rbp[j + 1]};
  }
  if (!tail) return;
  int tail_end = tail_from + (w.n - k);  // tail's first frame w does not hold
  int pairs = (tail_end < tail->n ? tail->first_pair[tail_end - 1] : tail->npairs) -
              tail->first_pair[tail_from];
  int words = (tail_end < tail->n ? tail->first_word[tail_end - 1] : tail->nwords) -
              tail->first_word[tail_from];
  for (int j = k; j < w.n; ++j) {
    int t = tail_from + (j - k);
    w.first_pair[j] =
        static_cast<uint16_t>(tail->first_pair[t] - tail->first_pair[tail_from] + w.npairs);
    w.first_word[j] =
        static_cast<uint16_t>(tail->first_word[t] - tail->first_word[tail_from] + w.nwords);
  }
  memcpy(w.pair + w.npairs, tail->pair + tail->first_pair[tail_from],
         static_cast<size_t>(pairs) * sizeof(PairCheck));
  memcpy(w.word + w.nwords, tail->word + tail->first_word[tail_from],
         static_cast<size_t>(words) * sizeof(WordCheck));
  w.npairs += pairs;
  w.nwords += words;
}

// The walk's first frame: its caller's, or the hook's (below).
struct Start {
  uint64_t ip, rsp, rbp, hi;
};

// The first frame outside torchseal, from the frame `fp` of a function of
// ours; false on another stack or past kCaptureSlack frames of ours.
__attribute__((always_inline)) inline bool first_frame(const uint64_t *fp, Start &s) {
  s.hi = stack_top();
  // Inside a hook: start at its frame, above the shim's own (the walk
  // still skips any of ours it meets).
  if (const auto *hook = static_cast<const uint64_t *>(hook_detail::t_hook_frame);
      hook > fp && reinterpret_cast<uint64_t>(hook) + 16 < s.hi)
    fp = hook;
  s.rsp = reinterpret_cast<uint64_t>(fp) + 16;
  // On another stack (sigaltstack, a coroutine): bounds unknown.
  if (s.rsp >= s.hi || s.hi - s.rsp > (uint64_t{1} << 32)) return false;
  s.ip = fp[1];
  s.rbp = fp[0];
  // torchseal's own frames: the shim is built with frame pointers, so they
  // need no rule.
  for (int self = 0; is_self(s.ip); ++self) {
    uint64_t cfa = s.rbp + 16;
    if (self == kCaptureSlack || cfa <= s.rsp || cfa > s.hi) return false;
    s.ip = load(s.rbp + 8);
    s.rsp = cfa;
    s.rbp = load(s.rbp);
  }
  return true;
}

// The same stack as this thread's last walk (an allocation in a loop): the
// memo's frames, once its checks hold. Kept apart from walk() so that this,
// the common case, pays for none of the walk's setup.
__attribute__((always_inline)) inline int same_as_last(const Start &s, int max, uint64_t *hash,
                                                       const uint64_t **frames) {
  MemoPair *mp = ThreadMemo::get();
  if (!mp) return -1;
  const WalkMemo &w = mp->buf[mp->cur ^ 1];
  // Reusable whole if it ended by itself within max, or at max exactly.
  if (w.n <= 0 || w.n > max || (!w.whole && w.n != max)) return -1;
  if (w.gen != g_memo_gen.load(std::memory_order_relaxed) || w.rsp[0] != s.rsp || w.ip[0] != s.ip ||
      (w.rbp_in[0] && w.rbp[0] != s.rbp) || !memo_holds(w, 0))
    return -1;
  ++mp->reused;
  ++mp->same;
  *hash = w.hash;
  *frames = w.ip;
  return w.n;
}

// Walks from frame `s` outwards into `out`. Returns the frames kept and
// their hash, or -1 when libunwind must do this capture. The last walk's
// stack whole again is same_as_last()'s; this one ends in the memo where it
// meets the last walk's outer frames.
__attribute__((noinline)) int walk(const Start &s, uint64_t *out, int max, uint64_t *hash,
                                   bool use_memo);

// The walk, with this thread's memo claimed for its duration. The frames are
// in `out`, or, when the stack is the last walk's again, in the memo
// (`*frames` says where; valid until this thread's next walk).
__attribute__((noinline)) int fast_walk(uint64_t *out, int max, uint64_t *hash,
                                        const uint64_t **frames) {
  if (max <= 0) return -1;  // the walk's end test needs room for one frame
  Start s;
  if (!first_frame(static_cast<const uint64_t *>(__builtin_frame_address(0)), s)) return -1;
  bool outer = !t_walking;
  t_walking = true;
  *frames = out;
  int n = outer ? same_as_last(s, max, hash, frames) : -1;
  if (n < 0) n = walk(s, out, max, hash, outer);
  if (outer) t_walking = false;
  return n;
}

__attribute__((noinline)) int walk(const Start &s, uint64_t *out, int max, uint64_t *hash,
                                   bool use_memo) {
  uint64_t ip = s.ip, rsp = s.rsp, rbp = s.rbp, hi = s.hi;
  // The generation before the table: an unload bumps it before and after
  // replacing the table, so a walk that read the old table cannot label
  // its memo with the generation that follows the replacement.
  uint64_t gen = g_memo_gen.load(std::memory_order_acquire);
  unwind::RuleTable::Table table = g_rules.table();
  MemoPair *mp = use_memo ? ThreadMemo::get_or_make() : nullptr;
  WalkMemo *rec = nullptr, *prev = nullptr;
  if (mp) {
    rec = &mp->buf[mp->cur];
    prev = &mp->buf[mp->cur ^ 1];
    if (prev->gen != gen) prev->n = 0;
    rec->n = 0;
    rec->npairs = rec->nwords = 0;
  }
  int m = 0;  // the first frame of `prev` not yet below this walk's rsp
  // Pointers rather than a count and a limit: the loop then fits in
  // registers (the count and limit were spilled to the stack).
  uint64_t *p = out, *const end = out + max;
  IpHasher h;
  uint64_t end_src = 0;
  bool whole = true;
  for (;;) {
    if (prev) {
      while (m < prev->n && prev->rsp[m] < rsp) ++m;
      if (m < prev->n && prev->rsp[m] == rsp && prev->ip[m] == ip &&
          (!prev->rbp_in[m] || prev->rbp[m] == rbp)) {
        int k = static_cast<int>(p - out);
        // Reusable if the old walk ended by itself, or reaches max here.
        if ((prev->whole || k + prev->n - m >= max) && memo_holds(*prev, m)) {
          int take = prev->n - m;
          if (take > max - k) take = max - k;
          ++mp->reused;
          memcpy(p, prev->ip + m, static_cast<size_t>(take) * sizeof(uint64_t));
          p += take;
          int n = static_cast<int>(p - out);
          for (int j = 0; j < take; ++j) h.add(prev->ip[m + j]);
          *hash = h.finish(n);
          // This walk's inner frames and the old walk's outer ones, as far
          // as this walk took them, are the next walk's memo: a walk cut at
          // `max`. (A memo longer than `max` can never serve a stack whole
          // again: every later walk started over and merged again, 2.2x the
          // cost at depth 80, bench/RESULTS.md.)
          bool cut = take < prev->n - m;
          int total = k + take;
          if (rec && total <= kMemoFrames) {
            for (int j = m; j < m + take; ++j) {
              rec->ip[k + j - m] = prev->ip[j];
              rec->rsp[k + j - m] = prev->rsp[j];
              rec->rbp[k + j - m] = prev->rbp[j];
              rec->rbp_src[k + j - m] = prev->rbp_src[j];
              rec->rbp_read[k + j - m] = prev->rbp_read[j];
              rec->rbp_in[k + j - m] = prev->rbp_in[j];
            }
            rec->n = total;
            rec->end_src = cut ? 0 : prev->end_src;
            make_checks(*rec, k, prev->rbp_in[m], prev, m);
            rec->whole = !cut && prev->whole;
            rec->gen = gen;
            rec->hash = *hash;
            mp->cur ^= 1;
          }
          return n;
        }
        prev = nullptr;  // it no longer holds: walk on
      }
    }
    int k = static_cast<int>(p - out);
    bool keep = rec && k < kMemoFrames;
    if (keep) {
      rec->ip[k] = ip;
      rec->rsp[k] = rsp;
      rec->rbp[k] = rbp;
      rec->rbp_src[k] = 0;       // until a step says otherwise (the last frame
      rec->rbp_read[k] = false;  // of a walk cut at max is never stepped)
    }
    *p++ = ip;
    h.add(ip);
    if (p == end) {
      whole = false;
      break;
    }
    uint64_t i = unwind::RuleTable::index(ip);
    // The home slot's key xor ip: ~0 names the frame-pointer rule, 0 another
    // rule of ip's; the frame-pointer step is the loop's own body.
    uint64_t key = unwind::RuleTable::key_at(table, i) ^ ip;
    uint64_t rbp_src = 0;
    bool rbp_in = false;  // the End rule reads nothing
    if (__builtin_expect(key == ~uint64_t{0}, 1)) {
      // apply() specialised: both loads are within 16 bytes below the
      // checked CFA, so inside the stack mapping.
      uint64_t cfa = rbp + 16;
      if (cfa <= rsp || cfa > hi) return -1;
      rbp_src = rbp;
      ip = load(rbp + 8);
      rsp = cfa;
      rbp = load(rbp);
      if (keep) {
        rec->rbp_src[k] = rbp_src;
        rec->rbp_read[k] = true;
      }
      if (!ip) {
        end_src = rsp - 8;
        break;
      }
      continue;
    }
    int r = other_step(table, i, key, ip, rsp, rbp, hi, rbp_src, rbp_in);
    if (r < 0) return -1;
    if (keep) {
      rec->rbp_src[k] = rbp_src;
      rec->rbp_read[k] = rbp_in;
    }
    if (r == 0) {
      // A step that loaded a 0 return address (apply() moved rsp to the
      // CFA), or the End rule (nothing loaded: rsp did not move).
      if (keep && rsp != rec->rsp[k]) end_src = rsp - 8;
      break;
    }
  }
  int n = static_cast<int>(p - out);
  *hash = h.finish(n);
  if (rec && n <= kMemoFrames) {
    rec->n = n;
    rec->end_src = end_src;
    make_checks(*rec, n, false, nullptr, 0);
    rec->whole = whole;
    rec->gen = gen;
    rec->hash = *hash;
    mp->cur ^= 1;
  }
  return n;
}

// Without libunwind: the executable ranges of the loaded objects, so the
// frame-pointer walk can tell a return address from whatever a frame built
// without frame pointers left in rbp. Rebuilt when the loader's object
// count changed; old tables are kept (never freed) because a walker on
// another thread may still read one.
std::atomic<const CodeRanges *> g_exec{nullptr};
std::mutex g_exec_mu;

int collect_exec(struct dl_phdr_info *info, size_t, void *data) {
  auto *r = static_cast<CodeRanges *>(data);
  r->adds = info->dlpi_adds;
  r->subs = info->dlpi_subs;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uint64_t lo = info->dlpi_addr + ph.p_vaddr;
    r->ranges.emplace_back(lo, lo + ph.p_memsz);
  }
  return 0;
}

int read_counts(struct dl_phdr_info *info, size_t, void *data) {
  auto *r = static_cast<CodeRanges *>(data);
  r->adds = info->dlpi_adds;
  r->subs = info->dlpi_subs;
  return 1;
}

CodeRanges loaded_code() {
  CodeRanges now;
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(collect_exec, &now);
  }
  std::sort(now.ranges.begin(), now.ranges.end());
  return now;
}

const CodeRanges *exec_ranges(bool refresh) {
  const CodeRanges *cur = g_exec.load(std::memory_order_acquire);
  if (cur && !refresh) return cur;
  CodeRanges counts;
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(read_counts, &counts);
  }
  if (cur && counts.adds == cur->adds && counts.subs == cur->subs) return cur;
  std::lock_guard<std::mutex> lock(g_exec_mu);
  auto *next = new CodeRanges(loaded_code());
  g_exec.store(next, std::memory_order_release);
  return next;
}

bool is_code(uint64_t ip) {
  if (unwind::in_ranges(exec_ranges(false)->ranges, ip)) return true;
  return unwind::in_ranges(exec_ranges(true)->ranges, ip);  // something loaded since?
}

// Frame pointers alone, within this thread's stack, stopping at the first
// return address outside every loaded object's code: code built without
// frame pointers ends the stack early, never with a wrong frame or a fault.
// About as cheap as the fast walker (glibc's backtrace() parses unwind
// tables on every call: 11-13 us a stack at depth 30).
__attribute__((noinline)) int fp_walk(uint64_t *out, int max) {
  const auto *fp = static_cast<const uint64_t *>(__builtin_frame_address(0));
  uint64_t hi = stack_top();
  uint64_t rsp = reinterpret_cast<uint64_t>(fp) + 16;
  if (rsp >= hi || hi - rsp > (uint64_t{1} << 32)) return 0;
  uint64_t ip = fp[1], rbp = fp[0];
  for (int self = 0; is_self(ip); ++self) {
    uint64_t cfa = rbp + 16;
    if (self == kCaptureSlack || cfa <= rsp || cfa > hi) return 0;
    ip = load(rbp + 8);
    rsp = cfa;
    rbp = load(rbp);
  }
  int n = 0;
  while (n < max && ip && is_code(ip)) {
    out[n++] = ip;
    uint64_t cfa = rbp + 16;
    if (cfa <= rsp || cfa > hi) break;
    ip = load(rbp + 8);
    rsp = cfa;
    rbp = load(rbp);
  }
  return n;
}

const uint64_t *libunwind_capture(uint64_t (&buf)[kCaptureBufFrames], int max, int *n_out) {
  if (!g_unw_backtrace) {
    *n_out = fp_walk(buf, max < kCaptureBufFrames ? max : kCaptureBufFrames);
    return buf;
  }
  int want = max + kCaptureSlack;
  if (want > kCaptureBufFrames) want = kCaptureBufFrames;
  auto *raw = reinterpret_cast<void **>(buf);
  int n = g_unw_backtrace(raw, want);
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

const char *unwinder_init(UnwindMode mode, std::string *why) {
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(find_self, reinterpret_cast<void *>(&unwinder_init));
  }
  g_mode = mode;
  runtime_libs::Opened lib = runtime_libs::open("libunwind.so.8", RTLD_NOW);
  void *h = lib.handle;
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
  if (why) *why = h ? "libunwind without unw_backtrace" : lib.error;
  runtime_libs::note_degraded("short native stacks: libunwind unavailable, frame pointers only");
  exec_ranges(true);
  return "frame pointers only";
}

const uint64_t *capture_stack_inplace(uint64_t (&buf)[kCaptureBufFrames], int max, int *n_out,
                                      uint64_t *hash) {
  static_assert(sizeof(void *) == sizeof(uint64_t));
  if (g_fast.load(std::memory_order_relaxed)) {
    int want = max < kCaptureBufFrames ? max : kCaptureBufFrames;
    const uint64_t *frames;
    int n = fast_walk(buf, want, hash, &frames);
    if (n >= 0) {
      if (g_mode == UnwindMode::Check) check_against_libunwind(frames, n, want);
      *n_out = n;
      return frames;
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

namespace {

// The ranges of `before` that are not loaded any more; false when that
// cannot be told: something was loaded since `before` (another thread's
// dlopen), which may sit where the unloaded code was, in the same range.
bool gone_since(const CodeRanges &before, unwind::AddressRanges *gone) {
  CodeRanges now = loaded_code();
  if (now.adds != before.adds) return false;
  std::set_difference(before.ranges.begin(), before.ranges.end(), now.ranges.begin(),
                      now.ranges.end(), std::back_inserter(*gone));
  return true;
}

}  // namespace

CodeRanges unwinder_code_before_unload() {
  return g_fast.load(std::memory_order_relaxed) ? loaded_code() : CodeRanges{};
}

void unwinder_code_unloaded(const CodeRanges &before) {
  g_memo_gen.fetch_add(1, std::memory_order_relaxed);
  if (!g_fast.load()) return;
  // No rule keyed inside what went away: every rule still describes the code
  // at its address (a rule is only learned for a return address on a live
  // stack, whose code cannot be unloaded under it), so the table stays.
  unwind::AddressRanges gone;
  if (!before.ranges.empty() && gone_since(before, &gone) && !g_rules.has_key_in(gone)) return;
  bool cleared = g_rules.clear();
  g_memo_gen.fetch_add(1, std::memory_order_release);  // see walk()
  if (!cleared) {
    // Many unloads (each retires a table): stop learning, walk with libunwind.
    g_fast.store(false);
    log::warn(
        "unwinder: code was unloaded too often to keep learned frame rules; stacks are "
        "walked by libunwind from now on");
  }
}

void unwinder_after_fork() {
  g_rules.reset_lock_after_fork();
  // A parent's thread may have been refreshing the ranges; the tables it
  // published are whole (each is complete before g_exec points at it).
  new (&g_exec_mu) std::mutex();
}

void unwinder_log_summary() {
  if (!g_fast.load() && !g_learned.load()) return;
  uint64_t fb = g_fallbacks.load(std::memory_order_relaxed);
  const MemoPair *mine = ThreadMemo::get();
  uint64_t reused = g_memo_reused.load() + (mine ? mine->reused : 0);
  uint64_t same = g_memo_same.load() + (mine ? mine->same : 0);
  if (g_mode == UnwindMode::Check) {
    uint64_t checked = g_checked.load(), bad = g_mismatches.load();
    // Warn level: it is the answer the user asked for with =check.
    log::warn(
        "unwind check: %llu stacks compared with libunwind, %llu differed; %llu walked "
        "by libunwind alone; %llu frame rules learned; %llu walks finished from the "
        "previous one's frames, %llu of them the same stack whole",
        static_cast<unsigned long long>(checked), static_cast<unsigned long long>(bad),
        static_cast<unsigned long long>(fb), static_cast<unsigned long long>(g_learned.load()),
        static_cast<unsigned long long>(reused), static_cast<unsigned long long>(same));
  } else {
    log::info(
        "unwinder: %llu stacks handed to libunwind; %llu frame rules learned; %llu walks "
        "finished from the previous one's frames, %llu of them the same stack whole (this "
        "thread's and exited threads')",
        static_cast<unsigned long long>(fb), static_cast<unsigned long long>(g_learned.load()),
        static_cast<unsigned long long>(reused), static_cast<unsigned long long>(same));
  }
}

}  // namespace torchseal
