#include "shim/core/python/backward_waiter.h"

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

// Waiting threads as first seen, so the most recent one can be chosen.
struct Waiter {
  uintptr_t tstate;
  uintptr_t code;
  uint64_t seq;  // 0 = empty
};
constexpr int kWaiters = 16;

struct State {
  ShardLock lock;
  CodeVerdict verdicts[kVerdicts];
  Waiter waiters[kWaiters];
  uint64_t next_seq = 0;
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
  uintptr_t name_obj = rd_ptr(key.code + l.co_name);
  bool engine = copy_unicode(in, name_obj, 64, name) &&
                copy_unicode(in, rd_ptr(key.code + l.co_filename), kMaxFileBytes, file) &&
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

uintptr_t find_backward_waiter(const Interp &in, uintptr_t self) {
  if (!in.main_interp || !in.thread_head || !in.thread_next) return 0;
  auto interp = reinterpret_cast<uintptr_t>(in.main_interp());
  if (!plausible(interp)) return 0;
  Guard guard(g.lock);
  bool seen[kWaiters] = {};
  uintptr_t best = 0;
  uint64_t best_seq = 0;
  int count = 0;
  for (auto t = reinterpret_cast<uintptr_t>(in.thread_head(reinterpret_cast<void *>(interp)));
       t && count < kMaxThreads;
       t = reinterpret_cast<uintptr_t>(in.thread_next(reinterpret_cast<void *>(t))), ++count) {
    if (!plausible(t)) break;
    if (t == self) continue;
    PositionKey top;
    if (walk_frames(in, t, &top, 1) != 1 || !classify(in, top)) continue;
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

void reset_waiters_after_fork() { g.lock.reset_after_fork(); }

}  // namespace torchseal::py
