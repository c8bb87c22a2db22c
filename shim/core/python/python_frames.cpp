#include "shim/core/python/python_frames.h"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>

#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/python/backward_waiter.h"
#include "shim/core/python/code_locations.h"
#include "shim/core/python/frame_walker.h"
#include "shim/core/python/py_stack_table.h"
#include "shim/core/python/python_runtime.h"

namespace torchseal::py {
namespace {

enum State : int {
  kUninit = 0,
  kOff,          // TORCHSEAL_PYTHON=off
  kNotFound,     // no Python yet: capture() keeps looking (late_probe_if_due)
  kUnsupported,  // Python present, unreadable: said once, never retried
  kActive,
};

std::atomic<int> g_state{kUninit};
Interp g_interp;  // written before g_state becomes kActive (release)
ShardLock g_probe_lock;
std::atomic<uint64_t> g_next_probe_ns{0};
std::atomic<uint64_t> g_probed_generation{0};
constexpr uint64_t kReprobeIntervalNs = 20'000'000;

// Never destroyed: they must outlive every thread that may still call
// capture() during exit. Lazy, not function-local statics: the writer thread
// may be building one when a thread forks (see reset_after_fork).
constinit Lazy<LocationTable> g_locations;
constinit Lazy<PyStackTable> g_stacks;
LocationTable &locations() { return g_locations.get(); }
PyStackTable &stacks() { return g_stacks.get(); }

// Per-thread caches, so a repeated call site costs a walk plus one lookup:
// whole stacks keyed by the hash of their positions, and single positions.
// Heap-allocated on a thread's first capture (too large for static TLS in a
// dlopen'ed library); freed at thread exit.
struct ThreadCache {
  static constexpr int kStacks = 512;
  static constexpr int kPositions = 1024;
  struct StackSlot {
    uint64_t hash;  // 0 = empty
    PyStackId id;
  };
  struct PositionSlot {
    PositionKey key;
    LocId id;  // 0 = empty
  };
  StackSlot stacks[kStacks];
  PositionSlot positions[kPositions];
  TlbcCache tlbc;  // free-threaded 3.14+ only
};

struct ThreadCacheHolder {
  ThreadCache *cache = nullptr;
  bool dead = false;  // past this thread's TLS destructors: run uncached
  ~ThreadCacheHolder() {
    std::free(cache);
    cache = nullptr;
    dead = true;
  }
};
thread_local ThreadCacheHolder t_holder;

__attribute__((always_inline)) inline ThreadCache *thread_cache() {
  ThreadCacheHolder &h = t_holder;
  if (!h.cache && !h.dead)
    h.cache = static_cast<ThreadCache *>(std::calloc(1, sizeof(ThreadCache)));
  return h.cache;
}

uint64_t monotonic_coarse_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Under g_probe_lock.
void probe_locked() {
  Interp in;
  std::string why;
  g_probed_generation.store(loaded_object_generation(), std::memory_order_relaxed);
  switch (probe_interpreter(in, why)) {
    case ProbeResult::Absent:
      g_state.store(kNotFound, std::memory_order_release);
      return;
    case ProbeResult::Unsupported:
      log::warn("%s", why.c_str());
      g_state.store(kUnsupported, std::memory_order_release);
      return;
    case ProbeResult::Found:
      g_interp = in;
      log::debug("Python %s frames enabled", in.version);
      g_state.store(kActive, std::memory_order_release);
      return;
  }
}

__attribute__((always_inline)) inline uint64_t stack_hash(const PositionKey *frames, int n) {
  uint64_t h = 0x452821e638d01377ULL ^ static_cast<uint64_t>(n);
  // One multiply per frame (this runs on every event); mixed once at the end.
  for (int i = 0; i < n; ++i) {
    uint64_t v = frames[i].fingerprint ^ (static_cast<uint64_t>(frames[i].offset) << 32);
    h = std::rotl(h ^ v, 27) * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
  }
  return mix64(h) | 1;  // never 0: 0 marks an empty cache slot
}

LocId resolve_position(const Interp &in, ThreadCache *tc, const PositionKey &key) {
  ThreadCache::PositionSlot *slot = nullptr;
  if (tc) {
    slot = &tc->positions[(key.hash() >> 7) & (ThreadCache::kPositions - 1)];
    if (slot->id && slot->key == key) return slot->id;
  }
  LocId id = locations().resolve(in, key);
  if (slot && id) *slot = {key, id};
  return id;
}

}  // namespace

void init(bool enabled) {
  Guard g(g_probe_lock);
  if (g_state.load(std::memory_order_acquire) != kUninit) return;
  if (!enabled) {
    g_state.store(kOff, std::memory_order_release);
    return;
  }
  probe_locked();
}

namespace {
thread_local uint32_t t_late_calls __attribute__((tls_model("initial-exec"))) = 0;

// A process without Python asks on every allocation: the clock is looked at
// only every 64th time, counted inline where capture() asks.
__attribute__((always_inline)) inline bool late_probe_skipped() { return ++t_late_calls & 63; }

// Re-probes, at most every few milliseconds and only after a new shared
// object was loaded, when init() found no Python: an application may dlopen
// libpython after its first CUDA call.
__attribute__((noinline)) void late_probe_if_due() {
  uint64_t now = monotonic_coarse_ns();
  uint64_t next = g_next_probe_ns.load(std::memory_order_relaxed);
  if (now < next) return;
  if (!g_next_probe_ns.compare_exchange_strong(next, now + kReprobeIntervalNs)) return;
  // Nothing loaded since the last probe: nothing new to find.
  if (loaded_object_generation() == g_probed_generation.load(std::memory_order_relaxed)) return;
  Guard g(g_probe_lock);
  if (g_state.load(std::memory_order_acquire) == kNotFound) probe_locked();
}
}  // namespace

std::string version() {
  return g_state.load(std::memory_order_acquire) == kActive ? std::string(g_interp.version)
                                                            : std::string();
}

namespace {

std::atomic<BorrowLabelFn> g_borrow_label{nullptr};

// Frames (innermost first) to a PyStackId, through the thread's caches.
// `label` (0 = none) goes in as the innermost frame and into the hash.
__attribute__((always_inline)) inline PyStackId intern_frames(const Interp &in,
                                                              const PositionKey *frames, int n,
                                                              LocId label) {
  ThreadCache *tc = thread_cache();
  uint64_t h = stack_hash(frames, n);
  if (label) h = mix64(h ^ label) | 1;
  ThreadCache::StackSlot *slot = nullptr;
  if (tc) {
    slot = &tc->stacks[(h >> 11) & (ThreadCache::kStacks - 1)];
    if (slot->hash == h) return slot->id;
  }

  LocId ids[kMaxPyFrames + 1];
  int m = 0;
  if (label) ids[m++] = label;
  for (int i = 0; i < n; ++i) {
    LocId id = resolve_position(in, tc, frames[i]);
    if (id) ids[m++] = id;
  }
  if (in.is_finalizing()) return 0;
  PyStackId id =
      stacks().intern(ids, static_cast<size_t>(m), PyStackTable::hash(ids, static_cast<size_t>(m)));
  if (slot && id) *slot = {h, id};
  return id;
}

// A thread with a thread state and no frames: PyTorch's autograd engine
// thread, running backward for a thread that waits in it. Never reached by
// a thread that has frames of its own.
__attribute__((noinline)) PyStackId capture_borrowed(const Interp &in, uintptr_t self) {
  PositionKey frames[kMaxPyFrames];
  int n = borrow_backward_stack(in, self, monotonic_coarse_ns(), frames, kMaxPyFrames);
  if (n == 0 || in.is_finalizing()) return 0;
  char node[128];
  std::string label = "<autograd ";
  BorrowLabelFn fn = g_borrow_label.load(std::memory_order_acquire);
  label += fn && fn(node, sizeof node) ? node : "engine";
  label += '>';
  return intern_frames(in, frames, n, locations().intern_label(label));
}

}  // namespace

namespace {
std::atomic<bool> g_exiting{false};
}  // namespace

void note_exit_begun() { g_exiting.store(true, std::memory_order_relaxed); }

bool interpreter_exiting() {
  std::atomic<bool> &exiting = g_exiting;
  static std::atomic<bool> seen_running{false};
  if (exiting.load(std::memory_order_relaxed)) return true;
  if (g_state.load(std::memory_order_acquire) != kActive) return false;
  const Interp &in = g_interp;
  // Finalizing is set before modules are torn down; after Py_FinalizeEx
  // returns, only "no longer initialized" is left to see.
  bool initialized = in.is_initialized();
  if (in.is_finalizing() || (!initialized && seen_running.load(std::memory_order_relaxed))) {
    exiting.store(true, std::memory_order_relaxed);
    return true;
  }
  if (initialized) seen_running.store(true, std::memory_order_relaxed);
  return false;
}

void set_borrow_label(BorrowLabelFn fn) { g_borrow_label.store(fn, std::memory_order_release); }

namespace {

// The walk, with its frame buffer, out of capture(): a process without
// Python returns from capture() without that frame's setup (register saves
// and a 3.6 KiB frame, a fifth of the instructions of a capture's Python
// probe on every allocation).
__attribute__((noinline)) PyStackId capture_active() {
  const Interp &in = g_interp;
  if (!in.is_initialized() || in.is_finalizing()) return 0;
  // The GIL-state TSS slot: this thread's own state, set even while it has
  // released the GIL; NULL on threads Python never saw (CUDA's own).
  auto tstate = reinterpret_cast<uintptr_t>(in.this_thread_state());
  if (!tstate) return 0;

  PositionKey frames[kMaxPyFrames];
  ThreadCache *tc = in.layout->fr_tlbc_index != kAbsent ? thread_cache() : nullptr;
  int n = walk_frames(in, tstate, frames, kMaxPyFrames, tc ? &tc->tlbc : nullptr);
  if (n == 0) return capture_borrowed(in, tstate);
  // Finalization may have started during the walk: past this point thread
  // states and code objects of other threads can be freed under us.
  if (in.is_finalizing()) return 0;
  return intern_frames(in, frames, n, 0);
}

}  // namespace

PyStackId capture() {
  int state = g_state.load(std::memory_order_acquire);
  if (state == kActive) return capture_active();
  if (state != kNotFound || late_probe_skipped()) return 0;
  late_probe_if_due();
  return g_state.load(std::memory_order_acquire) == kActive ? capture_active() : 0;
}

void export_all(std::vector<std::vector<PyFrame>> &out) {
  std::vector<std::vector<LocId>> seqs;
  stacks().copy_since(0, seqs);
  out.assign(seqs.size() + 1, {});
  for (size_t i = 0; i < seqs.size(); ++i)
    locations().frames(seqs[i].data(), seqs[i].size(), out[i + 1]);
}

void for_each_since(uint64_t &cursor,
                    const std::function<void(PyStackId, const std::vector<PyFrame> &)> &fn) {
  std::vector<std::vector<LocId>> seqs;
  uint64_t first = cursor;
  cursor = stacks().copy_since(first, seqs);
  std::vector<PyFrame> frames;
  for (size_t i = 0; i < seqs.size(); ++i) {
    frames.clear();
    locations().frames(seqs[i].data(), seqs[i].size(), frames);
    fn(static_cast<PyStackId>(first + i + 1), frames);
  }
}

void reset_after_fork() {
  g_probe_lock.reset_after_fork();
  // Only tables this process built (the parent's writer may have been
  // building one when the fork came: the child builds its own).
  if (LocationTable *t = g_locations.built()) t->reset_locks_after_fork();
  if (PyStackTable *t = g_stacks.built()) t->reset_locks_after_fork();
  reset_waiters_after_fork();
}

}  // namespace torchseal::py
