#include "shim/sink/history_writer.h"

#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shim/sink/asymmetric_fence.h"
#include "shim/core/counters.h"
#include "report/format/event_codec.h"
#include "report/format/records.h"
#include "report/format/tseal_format.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/log.h"
#include "report/input/module_map.h"
#include "shim/core/python/python_frames.h"
#include "shim/core/recorder.h"
#include "shim/runtime/report_files.h"
#include "report/input/symbolizer.h"
#include "shim/runtime/torch_mode.h"

namespace torchseal::history {

std::atomic<bool> g_file_ok{false};

namespace {

// State::thread_running for the hot path, without S()'s guard.
std::atomic<bool> g_writer_running{false};

using tseal::Chunk;

constexpr size_t kSealBytes = 256 * 1024;  // hand a buffer to the writer past this
constexpr size_t kPassWakeBytes = 1024 * 1024;  // sealed bytes that start a pass early

// Event bytes: grown without zero-filling, so an append can reserve room
// for the largest event, encode in place, and trim to what was written.
template <typename T>
struct NoInitAllocator : std::allocator<T> {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = NoInitAllocator<U>;
  };
  NoInitAllocator() = default;
  template <typename U>
  NoInitAllocator(const NoInitAllocator<U> &) noexcept {}
  template <typename U>
  void construct(U *p) noexcept {
    ::new (static_cast<void *>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U *p, Args &&...args) {
    ::new (static_cast<void *>(p)) U(std::forward<Args>(args)...);
  }
};
using EventBytes = std::vector<uint8_t, NoInitAllocator<uint8_t>>;

constexpr size_t kFirstBufferBytes = 16 * 1024;

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
};

struct Sealed {
  uint32_t tid;
  uint64_t base_time;
  uint32_t count;
  EventBytes bytes;
};

struct State {
  ShardLock registry_lock;
  std::vector<ThreadBuf *> bufs;
  std::vector<Sealed> sealed;  // full buffers waiting for the writer
  size_t sealed_bytes = 0;     // under registry_lock
  int fd = -1;
  int wake_fd = -1;
  pthread_t thread{};
  bool thread_running = false;
  std::atomic<bool> stop{false};
  std::atomic<int> dump_request{0};  // 0 none, 1 signal, 2 api, 3 oom
  std::atomic<bool> crash_request{false};
  int crash_done_fd = -1;
  pthread_t writer_tid{};
  uint32_t stack_cursor[StackTable::kShards] = {};
  unsigned long long modules_adds = ~0ull, modules_subs = ~0ull;
  uint64_t events_written = 0;
  std::string path;
  uint64_t window_ns = 0;
  uint64_t py_cursor = 0;
  std::unordered_map<std::string, uint32_t> py_strings;  // interned across chunks
  ShardLock labels_lock;
  std::unordered_map<std::string, uint32_t> labels;  // mark label -> id, under labels_lock
  tseal::LabelsRecord new_labels;                    // not yet written, under labels_lock
};

// Bounds on what user marks can make the shim keep.
constexpr size_t kMaxLabels = 1 << 16;
constexpr size_t kMaxLabelBytes = 1024;

State &S() {
  alignas(State) static unsigned char storage[sizeof(State)];
  static State *s = new (storage) State();
  return *s;
}

std::atomic<uint32_t> g_cutting{0};

pthread_key_t g_exit_key;
pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
thread_local ThreadBuf *t_buf __attribute__((tls_model("initial-exec"))) = nullptr;

void on_thread_exit(void *p) { static_cast<ThreadBuf *>(p)->dead.store(true); }
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

// ---- writing ----

void disable_file(int err) {
  State &s = S();
  if (!g_file_ok.exchange(false)) return;
  // A full or read-only file system will refuse the reports too: say it once.
  bool fatal = err == ENOSPC || err == EDQUOT || err == EROFS;
  if (fatal) disable_report_output();
  log::error("history file %s: %s; %s, the program goes on", s.path.c_str(), strerror(err),
             fatal ? "torchseal stopped writing files" : "history recording stopped");
}

// Raw bytes, so the End chunk can be written from a stack buffer.
void write_bytes(const uint8_t *p, size_t n) {
  State &s = S();
  if (!g_file_ok.load()) return;
  size_t off = 0;
  while (off < n) {
    ssize_t w = ::write(s.fd, p + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      disable_file(errno);
      return;
    }
    off += static_cast<size_t>(w);
  }
}

void write_all(const std::vector<uint8_t> &out) { write_bytes(out.data(), out.size()); }

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

void append_modules_if_changed(std::vector<uint8_t> &out) {
  State &s = S();
  struct Counts {
    unsigned long long adds, subs;
  } c{0, 0};
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t size, void *data) {
        auto *cc = static_cast<Counts *>(data);
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          cc->adds = info->dlpi_adds;
          cc->subs = info->dlpi_subs;
        }
        return 1;
      },
      &c);
  if (c.adds == s.modules_adds && c.subs == s.modules_subs) return;
  s.modules_adds = c.adds;
  s.modules_subs = c.subs;
  tseal::append_record(out, Chunk::Modules, tseal::ModulesRecord{capture_module_map()});
}

void append_new_stacks(std::vector<uint8_t> &out) {
  tseal::StacksRecord rec;
  recorder().stacks().for_each_since(S().stack_cursor, [&](StackId id, const uint64_t *ips, uint32_t len) {
    rec.stacks.emplace_back(id, std::vector<uint64_t>(ips, ips + len));
  });
  if (!rec.stacks.empty()) tseal::append_record(out, Chunk::Stacks, rec);
}

// Python strings (function names, file paths) are interned once per file:
// a chunk defines only the strings new since the last one.
void append_new_python_stacks(std::vector<uint8_t> &out) {
  State &s = S();
  tseal::PyStacksRecord rec;
  auto intern = [&](const std::string &str) {
    auto it = s.py_strings.find(str);
    if (it != s.py_strings.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(s.py_strings.size() + 1);
    s.py_strings.emplace(str, id);
    rec.strings.emplace_back(id, str);
    return id;
  };
  py::for_each_since(s.py_cursor, [&](PyStackId id, const std::vector<PyFrame> &frames) {
    std::vector<tseal::PyStacksRecord::Frame> refs;
    refs.reserve(frames.size());
    for (const PyFrame &f : frames) {
      uint32_t fn = intern(f.function);
      refs.push_back({fn, intern(f.file), static_cast<uint32_t>(f.line < 0 ? 0 : f.line)});
    }
    rec.stacks.emplace_back(id, std::move(refs));
  });
  if (!rec.stacks.empty()) tseal::append_record(out, Chunk::PyStacks, rec);
}

// Taken after the pass's cut: every label a sealed Mark event uses was
// interned before it, so it is defined before the events that use it.
void append_new_labels(std::vector<uint8_t> &out) {
  State &s = S();
  tseal::LabelsRecord rec;
  {
    Guard g(s.labels_lock);
    rec.labels.swap(s.new_labels.labels);
  }
  if (!rec.labels.empty()) tseal::append_record(out, Chunk::Labels, rec);
}

void append_events(std::vector<uint8_t> &out, const Sealed &c) {
  std::vector<uint8_t> payload;
  payload.reserve(c.bytes.size() + 24);
  tseal::ByteWriter w(payload);
  tseal::EventsHeader{c.tid, c.base_time, c.count}.encode(w);
  payload.insert(payload.end(), c.bytes.begin(), c.bytes.end());
  tseal::append_chunk(out, Chunk::Events, payload);
  S().events_written += c.count;
}

Sealed seal(ThreadBuf &b) {
  Sealed c{b.tid, b.base_time, b.count, {}};
  b.bytes.resize(b.used);
  c.bytes.swap(b.bytes);
  b.bytes.resize(kFirstBufferBytes);
  b.used = 0;
  b.count = 0;
  return c;
}

// Waits for a thread to finish the append it is in (a few hundred ns,
// unless it was preempted). A thread stopped in the middle (a debugger, a
// signal handler that never returns, a crash in this very append) keeps its
// buffer for a later pass rather than hang the writer.
bool quiet(const ThreadBuf &b) {
  for (unsigned spins = 0; b.busy.load(std::memory_order_acquire); ++spins) {
    if (spins < 256) {
      __builtin_ia32_pause();
    } else if (spins < 256 + 2000) {
      timespec nap{0, 50'000};
      nanosleep(&nap, nullptr);
    } else {
      return false;
    }
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
  b.used += tseal::encode_event(b.bytes.data() + b.used, b.st, e);
  ++b.count;
  return b.used >= kSealBytes;
}

// One pass: drain every buffer, then write new modules and stacks before the
// events that reference them.
void pass() {
  State &s = S();
  std::vector<Sealed> chunks;
  std::vector<ThreadBuf *> dead;
  {
    Guard g(s.registry_lock);
    chunks.swap(s.sealed);
    s.sealed_bytes = 0;
    // Every buffer is sealed under all their locks at once: the pass is one
    // cut across threads. Drained one at a time, a thread whose buffer was
    // already drained could allocate (next pass) and hand the memory to a
    // thread not yet drained, whose free would then land in this pass,
    // before its allocation: the reader only orders events within a pass.
    for (ThreadBuf *b : s.bufs) b->lock.lock();
    g_cutting.store(1, std::memory_order_relaxed);
    asym::heavy();
    for (ThreadBuf *b : s.bufs)
      if (quiet(*b) && b->count) chunks.push_back(seal(*b));
    g_cutting.store(0, std::memory_order_release);
    for (ThreadBuf *b : s.bufs) b->lock.unlock();
    for (auto it = s.bufs.begin(); it != s.bufs.end();) {
      ThreadBuf *b = *it;
      if (b->dead.load()) {
        dead.push_back(b);
        it = s.bufs.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (ThreadBuf *b : dead) delete b;
  if (!g_file_ok.load()) return;
  std::vector<uint8_t> out;
  tseal::append_record(out, Chunk::Pass, tseal::PassRecord{now_ns()});
  append_modules_if_changed(out);
  append_new_stacks(out);
  append_new_python_stacks(out);
  append_new_labels(out);
  for (const Sealed &c : chunks) append_events(out, c);
  write_all(out);
}

void append_process_chunk(std::vector<uint8_t> &out) {
  tseal::ProcessRecord rec;
  fill_process_info(rec.info);
  // CLOCK_MONOTONIC -> unix time, for exports that need wall-clock stamps.
  rec.clock_base = unix_now() - static_cast<double>(now_ns()) / 1e9;
  tseal::append_record(out, Chunk::Process, rec);
}

void append_symbols(std::vector<uint8_t> &out) {
  std::vector<std::vector<uint64_t>> stacks;
  recorder().stacks().export_all(stacks);
  std::vector<uint64_t> ips;
  for (const auto &st : stacks) ips.insert(ips.end(), st.begin(), st.end());
  std::sort(ips.begin(), ips.end());
  ips.erase(std::unique(ips.begin(), ips.end()), ips.end());
  Symbolizer sym(capture_module_map());
  tseal::SymbolsRecord rec;
  rec.ips.reserve(ips.size());
  for (uint64_t ip : ips) rec.ips.emplace_back(ip, sym.symbolize(ip));
  tseal::append_record(out, Chunk::Symbols, rec);
}

// One End shape for the clean exit and the crash. Encoded on the stack: no
// allocation, so it also works when the crash left the heap inconsistent.
// The crash path passes no flags: asking the loader (dl_iterate_phdr) takes
// its lock, which the dying thread may hold.
void write_end(bool clean, uint8_t flags) {
  tseal::EndRecord end{unix_now(), S().events_written, clean, flags};
  uint8_t payload[tseal::EndRecord::kMaxBytes];
  uint8_t chunk[tseal::kChunkHeaderSize + tseal::EndRecord::kMaxBytes];
  write_bytes(chunk, tseal::put_chunk(chunk, Chunk::End, payload, end.encode(payload)));
}

const char *trigger_name(int req) {
  switch (req) {
    case 1: return "signal";
    case 2: return "api";
    case 3: return "oom";
    default: return "signal";
  }
}

void *writer_main(void *) {
  State &s = S();
  // Not an application thread: nothing it does is a user allocation.
  mark_thread_internal();
  pthread_setname_np(pthread_self(), "torchseal-wr");
  uint64_t next_window = s.window_ns ? now_ns() + s.window_ns : 0;
  while (!s.stop.load()) {
    pollfd pfd{s.wake_fd, POLLIN, 0};
    int rc = poll(&pfd, 1, static_cast<int>(kFlushIntervalMs));
    if (rc > 0) {
      uint64_t v;
      ssize_t ignored = read(s.wake_fd, &v, sizeof v);
      (void)ignored;
    }
    recorder().settle_ooms(false);  // OOMs nothing retried: unrecovered, dumped
    if (next_window && now_ns() >= next_window) {
      if (!recorder().explicit_steps()) recorder().on_step(true);
      next_window += s.window_ns;
    }
    pass();
    if (s.crash_request.exchange(false)) {
      // The process is dying: mark the file as not cleanly ended, then let
      // the faulting thread re-raise.
      write_end(false, 0);
      uint64_t one = 1;
      ssize_t ignored = write(s.crash_done_fd, &one, sizeof one);
      (void)ignored;
      continue;
    }
    int req = s.dump_request.exchange(0);
    if (req && !s.stop.load()) write_report(trigger_name(req));
  }
  return nullptr;
}

}  // namespace


void set_window_seconds(double seconds) {
  S().window_ns = seconds > 0 ? static_cast<uint64_t>(seconds * 1e9) : 0;
}

bool start(const std::string &path) {
  State &s = S();
  if (s.thread_running) return enabled();
  s.path = path;
  asym::init();
  s.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s.crash_done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!path.empty()) {
    s.fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (s.fd < 0) {
      log::error("cannot create history file %s: %s; only the exit report will be written",
                 path.c_str(), strerror(errno));
    } else {
      g_file_ok.store(true);
      std::vector<uint8_t> out;
      tseal::append_file_header(out);
      append_process_chunk(out);
      write_all(out);
    }
  }
  // Block every signal in the writer so the host's handlers never run on it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  s.thread_running = pthread_create(&s.thread, nullptr, writer_main, nullptr) == 0;
  g_writer_running.store(s.thread_running);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!s.thread_running) log::error("cannot start the history writer thread; history is off");
  return enabled();
}

void append(const Event &e) {
  if (!g_writer_running.load(std::memory_order_relaxed)) return;
  ThreadBuf *b = my_buf();
  bool full;
  b->busy.store(1, std::memory_order_relaxed);
  asym::light();
  if (!g_cutting.load(std::memory_order_acquire)) {
    full = put(*b, e);
    b->busy.store(0, std::memory_order_release);
  } else {
    b->busy.store(0, std::memory_order_release);
    Guard g(b->lock);  // until the cut is done
    full = put(*b, e);
  }
  if (full) {
    State &s = S();
    // Same lock order as pass() (registry, then buffer), and the seal and the
    // push happen under both, so a pass can never see this thread's later
    // events before this earlier chunk.
    bool wake = false;
    {
      Guard rg(s.registry_lock);
      Guard g(b->lock);
      if (b->used >= kSealBytes) {
        s.sealed_bytes += b->used;
        s.sealed.push_back(seal(*b));
        // A fast producer must not make one pass huge: a pass is what the
        // reader holds in memory at once, so start the next one early.
        wake = s.sealed_bytes >= kPassWakeBytes;
        if (wake) s.sealed_bytes = 0;
      }
    }
    if (wake && s.wake_fd >= 0) {
      uint64_t one = 1;
      ssize_t ignored = write(s.wake_fd, &one, sizeof one);
      (void)ignored;
    }
  }
}

uint32_t intern_label(const char *label) {
  State &s = S();
  std::string key(label, strnlen(label, kMaxLabelBytes));
  Guard g(s.labels_lock);
  auto it = s.labels.find(key);
  if (it != s.labels.end()) return it->second;
  if (s.labels.size() >= kMaxLabels) return 0;
  uint32_t id = static_cast<uint32_t>(s.labels.size() + 1);
  s.labels.emplace(key, id);
  s.new_labels.labels.emplace_back(id, std::move(key));
  return id;
}

void request_dump(const char *trigger) {
  State &s = S();
  int code = 1;
  if (trigger[0] == 'a') code = 2;
  else if (trigger[0] == 'o') code = 3;
  s.dump_request.store(code);
  if (s.wake_fd >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(s.wake_fd, &one, sizeof one);
    (void)ignored;
  }
}

void crash_flush(int timeout_ms) {
  State &s = S();
  if (!s.thread_running || s.wake_fd < 0 || s.crash_done_fd < 0) return;
  if (pthread_equal(pthread_self(), s.thread)) return;  // the writer itself crashed
  s.crash_request.store(true);
  uint64_t one = 1;
  ssize_t ignored = write(s.wake_fd, &one, sizeof one);
  (void)ignored;
  pollfd pfd{s.crash_done_fd, POLLIN, 0};
  poll(&pfd, 1, timeout_ms);
}

void finish(bool clean) {
  State &s = S();
  if (!s.thread_running) return;
  // A dump asked for just before exit (an OOM right before the program
  // gives up) is still written, after the writer stops.
  int pending = s.dump_request.exchange(0);
  s.stop.store(true);
  uint64_t one = 1;
  if (s.wake_fd >= 0) {
    ssize_t ignored = write(s.wake_fd, &one, sizeof one);
    (void)ignored;
  }
  pthread_join(s.thread, nullptr);
  s.thread_running = false;
  g_writer_running.store(false);
  pending = pending ? pending : s.dump_request.exchange(0);
  if (pending && clean) write_report(trigger_name(pending));
  pass();
  if (g_file_ok.load()) {
    std::vector<uint8_t> out;
    if (clean) {
      try {
        append_symbols(out);
      } catch (...) {
        log::warn("could not append the symbol table to %s", s.path.c_str());
      }
    }
    write_all(out);
    // Facts only known at exit that change the verdict: PyTorch's caching
    // allocator (live memory is cache) and a PyTorch process (pinned cache).
    write_end(clean, (torch_caching_allocator_in_use() ? tseal::kEndTorchCachingAllocator : 0) |
                         (torch_cuda_loaded() ? tseal::kEndTorchProcess : 0));
  }
  if (s.fd >= 0) close(s.fd);
  s.fd = -1;
  g_file_ok.store(false);
}

void reset_after_fork() {
  State &s = S();
  // The parent's writer thread does not exist here, and its file is not ours.
  if (s.fd >= 0) close(s.fd);
  if (s.wake_fd >= 0) close(s.wake_fd);
  if (s.crash_done_fd >= 0) close(s.crash_done_fd);
  s.fd = s.wake_fd = s.crash_done_fd = -1;
  s.crash_request.store(false);
  g_file_ok.store(false);
  s.thread_running = false;
  g_writer_running.store(false);
  s.stop.store(false);
  s.dump_request.store(0);
  s.registry_lock.reset_after_fork();
  g_cutting.store(0, std::memory_order_relaxed);
  // Other threads' buffers hold the parent's events and may have been
  // mid-update at the fork: abandon them (never free half-updated vectors).
  new (&s.bufs) std::vector<ThreadBuf *>();
  new (&s.sealed) std::vector<Sealed>();
  if (t_buf) {
    t_buf->lock.reset_after_fork();
    t_buf->busy.store(0, std::memory_order_relaxed);
    t_buf->used = 0;
    t_buf->count = 0;
    s.bufs.push_back(t_buf);
  }
  for (auto &c : s.stack_cursor) c = 0;
  s.py_cursor = 0;
  new (&s.py_strings) std::unordered_map<std::string, uint32_t>();
  // A file the child starts defines its labels afresh.
  s.labels_lock.reset_after_fork();
  new (&s.labels) std::unordered_map<std::string, uint32_t>();
  new (&s.new_labels) tseal::LabelsRecord();
  s.modules_adds = s.modules_subs = ~0ull;
  s.events_written = 0;
}

}  // namespace torchseal::history
