#include "shim/core/python/backward_waiter.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "shim/core/python/code_reader.h"
#include "shim/core/python/frame_walker.h"
#include "shim/core/python/raw_read.h"
#include "shim/core/shard_lock.h"

namespace torchseal::py {
namespace {

// A process with more Python threads than this is not scanned past it: the
// list is read without the interpreter's lock, so it must end regardless.
constexpr int kMaxThreads = 1024;

// Innermost-frame code objects already classified, by fingerprint (which
// includes the address). Direct-mapped: a collision only costs a re-read.
struct CodeVerdict {
  uint64_t fingerprint;  // 0 = empty
  bool engine;
};
constexpr int kVerdicts = 256;

// Every thread state begins with its `prev` and `next` links (CPython 3.10
// to 3.15, default and free-threaded builds alike): PyThreadState_Next would
// read `next` unguarded from a state its thread may be freeing.
constexpr uintptr_t kTstateNext = 8;

// The list and the waiter are looked at again after this long even while
// the cached waiter has not moved, so a newer waiter is noticed.
constexpr uint64_t kRescanNs = 2'000'000;

// Waiting threads as first seen, so the most recent one can be chosen.
struct Waiter {
  uintptr_t tstate;
  uintptr_t code;
  uint64_t seq;  // 0 = empty
};
constexpr int kWaiters = 16;

// The chosen waiter's walked stack, reused while its innermost frame has
// not moved (it is blocked in the engine call): one guarded walk per
// backward() call instead of one per allocation of the engine thread.
struct Borrowed {
  uintptr_t tstate = 0;
  uint64_t where = 0;  // innermost_state() when walked; 0 = nothing cached
  uint64_t scanned_ns = 0;
  int n = 0;
  PositionKey frames[kMaxPyFrames];
};

struct State {
  ShardLock lock;
  CodeVerdict verdicts[kVerdicts];
  Waiter waiters[kWaiters];
  uint64_t next_seq = 0;
  Borrowed borrowed;
};
State g;

bool ends_with(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Under g.lock. The code object belongs to another thread's innermost frame;
// a waiting thread keeps it alive, a running one may not (README.md).
bool classify(const Interp &in, const PositionKey &key) {
  CodeVerdict &v = g.verdicts[(key.fingerprint >> 17) & (kVerdicts - 1)];
  if (v.fingerprint == key.fingerprint) return v.engine;
  const Layout &l = *in.layout;
  std::string name, file;
  GuardedRead read;
  uintptr_t name_obj = read.ptr(key.code + l.co_name);
  uintptr_t file_obj = read.ptr(key.code + l.co_filename);
  bool engine = !read.failed() && copy_unicode_guarded(in, name_obj, 64, name) &&
                copy_unicode_guarded(in, file_obj, kMaxFileBytes, file) &&
                is_engine_call(name.c_str(), file.c_str());
  v = {key.fingerprint, engine};
  return engine;
}

}  // namespace

bool is_engine_call(const char *function, const char *file) {
  std::string fn(function), f(file);
  for (char &c : f)
    if (c == '\\') c = '/';
  if (ends_with(f, "torch/autograd/graph.py")) return fn == "_engine_run_backward";
  if (ends_with(f, "torch/autograd/__init__.py")) return fn == "backward" || fn == "grad";
  return false;
}

namespace {

// Where a thread's innermost frame is and what it executes, folded into one
// value: unchanged while the thread stays blocked in one call. 0 if unreadable.
uint64_t innermost_state(const Interp &in, uintptr_t tstate) {
  const Layout &l = *in.layout;
  GuardedRead read;
  uintptr_t f = read.ptr(tstate + l.ts_frame);
  if (l.cframe_current_frame != kAbsent && plausible(f))
    f = read.ptr(f + static_cast<uint32_t>(l.cframe_current_frame));
  if (!plausible(f)) return 0;
  uint64_t position = read.template get<uint64_t>(f + l.fr_position);
  if (read.failed()) return 0;
  return mix64(f ^ std::rotl(position, 23)) | 1;
}

// Under g.lock. The waiter to borrow from, by a walk of the thread list.
uintptr_t scan_for_waiter(const Interp &in, uintptr_t self) {
  auto interp = reinterpret_cast<uintptr_t>(in.main_interp());
  if (!plausible(interp)) return 0;
  bool seen[kWaiters] = {};
  uintptr_t best = 0;
  uint64_t best_seq = 0;
  int count = 0;
  // The interpreter outlives every thread state; the states themselves are
  // read guarded, since their threads may end and free them meanwhile.
  GuardedRead next;
  for (auto t = reinterpret_cast<uintptr_t>(in.thread_head(reinterpret_cast<void *>(interp)));
       t && count < kMaxThreads && !next.failed(); t = next.ptr(t + kTstateNext), ++count) {
    if (!plausible(t)) break;
    if (t == self) continue;
    PositionKey top;
    if (walk_other_thread(in, t, &top, 1) != 1 || !classify(in, top)) continue;
    int slot = -1, free_slot = -1;
    for (int i = 0; i < kWaiters; ++i) {
      if (g.waiters[i].seq && g.waiters[i].tstate == t && g.waiters[i].code == top.code)
        slot = i;
      else if (!g.waiters[i].seq && free_slot < 0)
        free_slot = i;
    }
    if (slot < 0) {
      if (free_slot < 0) continue;  // more waiters than slots: the known ones win
      slot = free_slot;
      g.waiters[slot] = {t, top.code, ++g.next_seq};
    }
    seen[slot] = true;
    if (g.waiters[slot].seq > best_seq) {
      best_seq = g.waiters[slot].seq;
      best = t;
    }
  }
  // A thread not waiting now has returned from its engine call: a later
  // call is a new one.
  for (int i = 0; i < kWaiters; ++i)
    if (!seen[i]) g.waiters[i] = {};
  return best;
}

}  // namespace

int borrow_backward_stack(const Interp &in, uintptr_t self, uint64_t now_ns, PositionKey *out,
                          int cap) {
  if (!in.main_interp || !in.thread_head) return 0;
  Guard guard(g.lock);
  Borrowed &b = g.borrowed;
  if (b.where && now_ns - b.scanned_ns < kRescanNs && innermost_state(in, b.tstate) == b.where) {
    int n = std::min(b.n, cap);
    std::copy(b.frames, b.frames + n, out);
    return n;
  }
  b.where = 0;
  uintptr_t waiter = scan_for_waiter(in, self);
  if (!waiter) return 0;
  // Read twice around the walk: a waiter that moved meanwhile (returned
  // from backward) gave a stack that may mix two moments; not kept.
  uint64_t where = innermost_state(in, waiter);
  int n = walk_other_thread(in, waiter, b.frames, kMaxPyFrames);
  if (n == 0 || where == 0 || innermost_state(in, waiter) != where) return 0;
  b.tstate = waiter;
  b.where = where;
  b.scanned_ns = now_ns;
  b.n = n;
  n = std::min(n, cap);
  std::copy(b.frames, b.frames + n, out);
  return n;
}

void reset_waiters_after_fork() {
  g.lock.reset_after_fork();
  g.borrowed.where = 0;  // the parent's threads are not the child's
}

}  // namespace torchseal::py
