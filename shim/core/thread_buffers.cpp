#include "shim/core/thread_buffers.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "common/format/event_codec.h"
#include "common/util/fork_safe.h"
#include "shim/core/asymmetric_fence.h"
#include "shim/core/shard_lock.h"

// A test build (tests/shim) yields now and then where an append has not yet
// marked itself busy, so that a whole cut can pass it there: the window in
// which an append once read its buffer's state too early.
#ifdef TORCHSEAL_TEST_PREEMPT_APPENDS
#include <sched.h>
#define TS_PREEMPTION_POINT()                        \
  do {                                               \
    static thread_local unsigned preempt_calls = 0;  \
    if ((++preempt_calls & 255) == 0) sched_yield(); \
  } while (0)
// And a thread can be held inside an append, marked busy: one preempted for
// longer than a cut waits (torchseal::history::test_stall_in_append).
namespace torchseal::history {
std::atomic<int> test_stall_in_append_ms{0};
}
#define TS_STALL_WHILE_BUSY()                                                     \
  do {                                                                            \
    if (int ms = test_stall_in_append_ms.exchange(0, std::memory_order_relaxed)) \
      usleep(static_cast<useconds_t>(ms) * 1000);                                 \
  } while (0)
#else
#define TS_PREEMPTION_POINT() \
  do {                        \
  } while (0)
#define TS_STALL_WHILE_BUSY() \
  do {                        \
  } while (0)
#endif

namespace torchseal::history {

namespace {

using buffers::EventBytes;
using buffers::Sealed;

// Whether the service thread runs, for the hot path.
std::atomic<bool> g_writer_running{false};

constexpr size_t kSealBytes = 256 * 1024;       // hand a buffer to the writer past this
constexpr size_t kPassWakeBytes = 1024 * 1024;  // sealed bytes that start a pass early
constexpr size_t kFirstBufferBytes = 16 * 1024;
// Sealed bytes waiting for the writer past which an allocating thread that
// seals a buffer waits for it (at most kBacklogWaitNs each time). A writer
// slower than the program (a slow disk; a capped history's replay behind
// many fast threads) would otherwise hold the difference in memory without
// bound.
constexpr size_t kBacklogBytes = 64u << 20;
constexpr uint64_t kBacklogWaitNs = 200'000'000;

// A thread appends to its own buffer without a locked instruction: it marks
// itself busy, and the writer, to cut a pass, raises g_cutting and waits
// for every busy mark to clear (asymmetric_fence.h orders the two sides).
// A thread that finds a cut under way appends under its buffer's lock,
// which the writer holds for the whole cut.
struct alignas(64) ThreadBuf {  // threads never share a line
  std::atomic<uint32_t> busy{0};
  ShardLock lock;
  EventBytes bytes;  // size() is the room; `used` the bytes written
  size_t used = 0;
  tseal::CodecState st;
  uint64_t base_time = 0;
  uint32_t count = 0;
  uint32_t tid = 0;
  std::atomic<bool> dead{false};
  bool exited_at_cut = false;  // the writer's own: `dead` as the last cut saw it
};

// Written buffers the writer handed back (recycle()), at most this many:
// a thread's next buffer is one of them, its pages already faulted in.
constexpr size_t kSpareBuffers = 8;

struct State {
  ShardLock registry_lock;
  std::vector<ThreadBuf *> bufs;
  std::vector<EventBytes> spare;   // under registry_lock
  std::vector<Sealed> sealed;      // full buffers waiting for the writer
  size_t sealed_bytes = 0;         // under registry_lock
  std::atomic<size_t> backlog{0};  // sealed since the last cut
  int wake_fd = -1;
  std::atomic<int> dump_request{0};  // 0 none, 1 signal, 2 api, 3 oom
  int deferred_cuts = 0;  // the writer's: cuts put off in a row (cut())
};

// Cuts put off in a row for a thread still inside an append before one
// goes on without it: such a thread is stopped (a debugger, a handler that
// never returns), not preempted.
constexpr int kMaxDeferredCuts = 3;

State &S() {
  static constinit Lazy<State> s;
  return s.get();
}

std::atomic<uint32_t> g_cutting{0};

pthread_key_t g_exit_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
thread_local ThreadBuf *t_buf __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_writer __attribute__((tls_model("initial-exec"))) = false;

// A free made later in the thread's exit (another library's thread-key
// destructor) starts a fresh buffer, flagged in turn when the destructors
// run again: never an append to one a cut may already have deleted.
void on_thread_exit(void *p) {
  t_buf = nullptr;
  static_cast<ThreadBuf *>(p)->dead.store(true, std::memory_order_release);
}
void make_key() { pthread_key_create(&g_exit_key, on_thread_exit); }

ThreadBuf *my_buf() {
  if (t_buf) return t_buf;
  auto *b = new ThreadBuf();
  b->tid = static_cast<uint32_t>(syscall(SYS_gettid));
  b->bytes.resize(kFirstBufferBytes);
  pthread_once(&g_key_once, make_key);
  pthread_setspecific(g_exit_key, b);
  {
    Guard g(S().registry_lock);
    S().bufs.push_back(b);
  }
  t_buf = b;
  return b;
}

// Under registry_lock (both callers hold it).
Sealed seal(ThreadBuf &b) {
  Sealed c{b.tid, b.base_time, b.count, {}};
  // The next buffer starts with the room this one grew to: a thread that
  // fills a buffer between two passes would otherwise grow a fresh one by
  // doubling, copying what it holds, after every pass (a cost per event
  // that grew with the number of passes, that is with wall time). A buffer
  // the writer is done with serves first (a fresh one faults its pages in
  // as the thread fills it), unless it is far larger than this thread
  // needs: a thread that allocates now and then keeps a small buffer.
  const size_t room = b.bytes.size();
  b.bytes.resize(b.used);
  c.bytes.swap(b.bytes);
  std::vector<EventBytes> &spare = S().spare;
  if (!spare.empty() && spare.back().capacity() <= 2 * room) {
    b.bytes.swap(spare.back());
    spare.pop_back();
  }
  b.bytes.resize(std::max(room, b.bytes.size()));
  b.used = 0;
  b.count = 0;
  return c;
}

// Waits for a thread to finish the append it is in (a few hundred ns,
// unless it was preempted). A thread stopped in the middle (a debugger, a
// signal handler that never returns, a crash in this very append) keeps its
// buffer for a later pass rather than hang the writer.
// The wait is timed, not counted: on a loaded machine each nap can last
// far longer than asked.
bool quiet(const ThreadBuf &b) {
  constexpr uint64_t kQuietWaitNs = 100'000'000;
  uint64_t start = 0;
  for (unsigned spins = 0; b.busy.load(std::memory_order_acquire); ++spins) {
    if (spins < 256) {
      __builtin_ia32_pause();
      continue;
    }
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t t = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
    if (!start) start = t;
    if (t - start >= kQuietWaitNs) return false;
    timespec nap{0, 50'000};
    nanosleep(&nap, nullptr);
  }
  return true;
}

// Encodes into the thread's buffer; true when it is due to be handed over.
__attribute__((always_inline)) inline bool put(ThreadBuf &b, const Event &e) {
  if (!b.count) {
    b.base_time = e.time_ns;
    b.st.reset(e.time_ns);
  }
  if (b.bytes.size() - b.used < tseal::kMaxEventBytes)
    b.bytes.resize(std::max(2 * b.bytes.size(), b.used + tseal::kMaxEventBytes));
  b.used += tseal::encode_event_hot(b.bytes.data() + b.used, b.st, e);
  ++b.count;
  return b.used >= kSealBytes;
}

void ring_fd(int fd) {
  if (fd < 0) return;
  uint64_t one = 1;
  ssize_t ignored = write(fd, &one, sizeof one);
  (void)ignored;
}

// Holds the calling thread while the writer is far behind (never the writer
// itself, and never for long: a stuck writer costs the wait, not a hang).
void wait_for_writer(State &s) {
  if (t_writer || s.backlog.load(std::memory_order_relaxed) < kBacklogBytes) return;
  ring_fd(s.wake_fd);
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (s.backlog.load(std::memory_order_relaxed) >= kBacklogBytes &&
         g_writer_running.load(std::memory_order_relaxed)) {
    timespec nap{0, 200'000}, now;
    nanosleep(&nap, nullptr);
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t waited = static_cast<uint64_t>(now.tv_sec - start.tv_sec) * 1'000'000'000 +
                      static_cast<uint64_t>(now.tv_nsec) - static_cast<uint64_t>(start.tv_nsec);
    if (waited >= kBacklogWaitNs) return;
  }
}

// A buffer past kSealBytes goes to the writer. Out of line: once per
// 256 KiB of events.
__attribute__((noinline)) void hand_over(ThreadBuf *b) {
  State &s = S();
  // Same lock order as cut() (registry, then buffer), and the seal and the
  // push happen under both, so a pass can never see this thread's later
  // events before this earlier chunk.
  bool wake = false;
  {
    Guard rg(s.registry_lock);
    Guard g(b->lock);
    if (b->used >= kSealBytes) {
      s.sealed_bytes += b->used;
      s.backlog.fetch_add(b->used, std::memory_order_relaxed);
      s.sealed.push_back(seal(*b));
      // A fast producer must not make one pass huge: a pass is what the
      // reader holds in memory at once, so start the next one early.
      wake = s.sealed_bytes >= kPassWakeBytes;
      if (wake) s.sealed_bytes = 0;
    }
  }
  if (wake) ring_fd(s.wake_fd);
  wait_for_writer(s);
}

// Every case but an alloc or free into a buffer with room while no cut
// is under way: a thread's first event, other ops, a buffer to grow.
__attribute__((noinline)) void append_slow(const Event &e) {
  ThreadBuf *b = my_buf();
  bool full;
  b->busy.store(1, std::memory_order_relaxed);
  asym::light();
  TS_STALL_WHILE_BUSY();
  if (!g_cutting.load(std::memory_order_acquire)) {
    full = put(*b, e);
    b->busy.store(0, std::memory_order_release);
  } else {
    b->busy.store(0, std::memory_order_release);
    Guard g(b->lock);  // until the cut is done
    full = put(*b, e);
  }
  if (full) hand_over(b);
}

}  // namespace

// The pair's two events take the short way: no buffer to create or grow,
// no other op's encoding, so no register saves for them (they were a
// sixth of an append's instructions). The buffer's state is read only once
// the thread is marked busy and no cut is under way: a cut that sealed the
// buffer just before leaves it empty, with its codec state to reset
// (put() does), and an event encoded against the old state decodes wrong.
void append(const Event &e) {
  if (!g_writer_running.load(std::memory_order_relaxed)) return;
  ThreadBuf *b = t_buf;
  if (__builtin_expect(b && tseal::is_pair_event(e), 1)) {
    TS_PREEMPTION_POINT();
    b->busy.store(1, std::memory_order_relaxed);
    asym::light();
    TS_STALL_WHILE_BUSY();
    if (__builtin_expect(!g_cutting.load(std::memory_order_acquire) && b->count &&
                             b->bytes.size() - b->used >= tseal::kMaxEventBytes,
                         1)) {
      size_t used = b->used + tseal::encode_pair_event(b->bytes.data() + b->used, b->st, e);
      b->used = used;
      ++b->count;
      b->busy.store(0, std::memory_order_release);
      if (used >= kSealBytes) hand_over(b);
      return;
    }
    b->busy.store(0, std::memory_order_release);
  }
  append_slow(e);
}

void request_dump(const char *trigger) {
  int code = 1;
  if (trigger[0] == 'a')
    code = 2;
  else if (trigger[0] == 'o')
    code = 3;
  State &s = S();
  s.dump_request.store(code);
  ring_fd(s.wake_fd);
}

namespace buffers {

void init() {
  asym::init();
  S().wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

int doorbell() { return S().wake_fd; }

void ring() { ring_fd(S().wake_fd); }

void set_accepting(bool on) { g_writer_running.store(on); }

void set_writer_thread() { t_writer = true; }

int take_dump_request() { return S().dump_request.exchange(0); }

std::vector<Sealed> cut(bool final) {
  State &s = S();
  std::vector<Sealed> chunks;
  std::vector<ThreadBuf *> dead;
  {
    Guard g(s.registry_lock);
    // Every buffer is sealed under all their locks at once: the pass is one
    // cut across threads. Drained one at a time, a thread whose buffer was
    // already drained could allocate (next pass) and hand the memory to a
    // thread not yet drained, whose free would then land in this pass,
    // before its allocation: the reader only orders events within a pass.
    for (ThreadBuf *b : s.bufs) b->lock.lock();
    g_cutting.store(1, std::memory_order_relaxed);
    // Unordered this time (asym::heavy): an append may be under way unseen.
    const bool ordered = asym::heavy();
    // For the same reason a thread still inside an append after quiet()'s
    // wait puts the whole cut off to the next pass (the buffers handed over
    // stay queued): sealing the others without it could put a free it
    // handed on in this pass and the allocation in the next, a false leak.
    // A final cut (exit, crash) and one past kMaxDeferredCuts go on without
    // it; its buffer waits for a later pass. A cut whose barrier failed is
    // put off the same way: a busy mark may not be visible yet.
    std::vector<char> still(s.bufs.size());
    bool all_still = true;
    for (size_t i = 0; i < s.bufs.size(); ++i) all_still &= (still[i] = quiet(*s.bufs[i])) != 0;
    if ((!all_still || !ordered) && !final && s.deferred_cuts < kMaxDeferredCuts) {
      ++s.deferred_cuts;
      g_cutting.store(0, std::memory_order_release);
      for (ThreadBuf *b : s.bufs) b->lock.unlock();
      return chunks;
    }
    if (all_still && ordered) s.deferred_cuts = 0;
    chunks.swap(s.sealed);
    s.sealed_bytes = 0;
    s.backlog.store(0, std::memory_order_relaxed);
    // Whether a thread had exited is read before its buffer is sealed: one
    // that exits after the seal (its last frees landing once the cut lets
    // go of it) still has events in the buffer, for the next cut to take.
    // Read after, such a buffer was deleted with its last events unwritten.
    for (size_t i = 0; i < s.bufs.size(); ++i) {
      ThreadBuf *b = s.bufs[i];
      b->exited_at_cut = b->dead.load(std::memory_order_acquire);
      if (still[i] && b->count) chunks.push_back(seal(*b));
    }
    g_cutting.store(0, std::memory_order_release);
    for (ThreadBuf *b : s.bufs) b->lock.unlock();
    for (auto it = s.bufs.begin(); it != s.bufs.end();) {
      if ((*it)->exited_at_cut) {
        dead.push_back(*it);
        it = s.bufs.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (ThreadBuf *b : dead) delete b;
  return chunks;
}

void recycle(std::vector<Sealed> &&chunks) {
  State &s = S();
  Guard g(s.registry_lock);
  for (Sealed &c : chunks) {
    if (s.spare.size() >= kSpareBuffers) break;
    c.bytes.clear();  // keeps the capacity
    s.spare.push_back(std::move(c.bytes));
  }
}

void reset_after_fork() {
  State &s = S();
  // The parent's writer thread does not exist here.
  if (s.wake_fd >= 0) close(s.wake_fd);
  s.wake_fd = -1;
  g_writer_running.store(false);
  s.dump_request.store(0);
  s.backlog.store(0);
  s.registry_lock.reset_after_fork();
  g_cutting.store(0, std::memory_order_relaxed);
  // Other threads' buffers hold the parent's events and may have been
  // mid-update at the fork: abandon them (never free half-updated vectors).
  new (&s.bufs) std::vector<ThreadBuf *>();
  new (&s.sealed) std::vector<Sealed>();
  new (&s.spare) std::vector<EventBytes>();
  if (t_buf) {
    t_buf->lock.reset_after_fork();
    t_buf->busy.store(0, std::memory_order_relaxed);
    // The parent's writer may have been sealing this very buffer (swapping
    // its vector out) at the fork: a fresh one, the old one abandoned.
    new (&t_buf->bytes) EventBytes();
    t_buf->bytes.resize(kFirstBufferBytes);
    t_buf->used = 0;
    t_buf->count = 0;
    s.bufs.push_back(t_buf);
  }
  s.deferred_cuts = 0;
}

}  // namespace buffers
}  // namespace torchseal::history
