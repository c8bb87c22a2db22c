#include "shim/sink/pass_writer.h"

#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <new>
#include <unordered_map>

#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "common/symbols/module_map.h"
#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/fast_clock.h"
#include "shim/core/loader_walk.h"
#include "shim/core/mark_labels.h"
#include "shim/core/python/python_frames.h"
#include "shim/core/thread_buffers.h"
#include "shim/sink/segments.h"

namespace torchseal::history {

std::atomic<bool> g_file_ok{false};

namespace file {

namespace {

using buffers::Sealed;
using tseal::Chunk;

struct State {
  int fd = -1;
  std::string path;
  bool (*on_fs_refused)() = nullptr;
  uint32_t stack_cursor[StackTable::kShards] = {};
  unsigned long long modules_adds = ~0ull, modules_subs = ~0ull;
  uint64_t events_written = 0;
  uint64_t py_cursor = 0;
  std::unordered_map<std::string, uint32_t> py_strings;  // interned across chunks
};

State &S() {
  static constinit Lazy<State> s;
  return s.get();
}

void disable_file(int err) {
  State &s = S();
  if (!g_file_ok.exchange(false)) return;
  // A full or read-only file system will refuse the reports too: say it once.
  bool fatal = err == ENOSPC || err == EDQUOT || err == EROFS;
  // A dump on another thread may have hit the same full disk first: the user
  // gets one line for one cause.
  if (fatal && s.on_fs_refused && !s.on_fs_refused()) return;
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

// Every piece, in order, as write_bytes() writes one.
void write_pieces(std::vector<iovec> &iov) {
  State &s = S();
  size_t i = 0;
  while (i < iov.size() && g_file_ok.load()) {
    int n = static_cast<int>(std::min<size_t>(iov.size() - i, IOV_MAX));
    ssize_t w = ::writev(s.fd, iov.data() + i, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      disable_file(errno);
      return;
    }
    auto left = static_cast<size_t>(w);
    while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
    if (left) {
      iov[i].iov_base = static_cast<uint8_t *>(iov[i].iov_base) + left;
      iov[i].iov_len -= left;
    }
  }
}

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

void append_modules_if_changed(std::vector<uint8_t> &out) {
  LoaderWalkGuard walking;  // both walks below (the count, then the map)
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

void append_new_stacks(std::vector<uint8_t> &out, StackTable &stacks) {
  tseal::StacksRecord rec;
  stacks.for_each_since(S().stack_cursor, [&](StackId id, const uint64_t *ips, uint32_t len) {
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
void append_new_labels(std::vector<uint8_t> &out, tseal::LabelsRecord &rec) {
  labels::take_new(rec);
  if (!rec.labels.empty()) tseal::append_record(out, Chunk::Labels, rec);
}


void append_process_chunk(std::vector<uint8_t> &out, const ProcessInfo &process,
                          double clock_base) {
  tseal::ProcessRecord rec;
  rec.info = process;
  rec.clock_base = clock_base;
  tseal::append_record(out, Chunk::Process, rec);
}

}  // namespace

void open(const std::string &path, const ProcessInfo &process, bool (*on_fs_refused)(),
          uint64_t limit) {
  State &s = S();
  s.path = path;
  s.on_fs_refused = on_fs_refused;
  s.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (s.fd < 0) {
    log::error("cannot create history file %s: %s; only the exit report will be written",
               path.c_str(), strerror(errno));
    return;
  }
  g_file_ok.store(true);
  std::vector<uint8_t> out;
  tseal::append_file_header(out, limit ? tseal::kFlagSegmented : 0);
  // CLOCK_MONOTONIC -> unix time, for exports that need wall-clock stamps.
  double clock_base = unix_now() - static_cast<double>(now_ns()) / 1e9;
  append_process_chunk(out, process, clock_base);
  write_all(out);
  if (limit) segments::begin(path, limit, out.size(), clock_base, write_all, disable_file);
}

void pass(StackTable &stacks, bool final) {
  std::vector<Sealed> chunks = buffers::cut(final);
  if (!g_file_ok.load()) return;
  std::vector<uint8_t> pass_chunk;
  tseal::append_record(pass_chunk, Chunk::Pass, tseal::PassRecord{now_ns()});
  std::vector<uint8_t> meta;
  append_modules_if_changed(meta);
  append_new_stacks(meta, stacks);
  append_new_python_stacks(meta);
  tseal::LabelsRecord labels;
  append_new_labels(meta, labels);
  if (segments::active()) {
    // Capped: what the events refer to stays in the main file, the events
    // go to the segments.
    for (const Sealed &c : chunks) S().events_written += c.count;
    segments::write_pass(meta, labels, chunks);
    buffers::recycle(std::move(chunks));
    return;
  }
  std::vector<uint8_t> &out = pass_chunk;
  out.insert(out.end(), meta.begin(), meta.end());
  // The events go to the file from the threads' buffers, framed but not
  // copied: copying them into one buffer for write() was half of this
  // thread's time (bench/RESULTS.md).
  std::vector<uint8_t> heads(chunks.size() * tseal::kEventsChunkHeadMax);
  std::vector<iovec> iov;
  iov.reserve(1 + 2 * chunks.size());
  iov.push_back({out.data(), out.size()});
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Sealed &c = chunks[i];
    uint8_t *h = heads.data() + i * tseal::kEventsChunkHeadMax;
    size_t hn = tseal::put_events_chunk_head(h, {c.tid, c.base_time, c.count}, c.bytes.data(),
                                             c.bytes.size());
    iov.push_back({h, hn});
    iov.push_back({const_cast<uint8_t *>(c.bytes.data()), c.bytes.size()});
    S().events_written += c.count;
  }
  write_pieces(iov);
  buffers::recycle(std::move(chunks));
}

void write_all(const std::vector<uint8_t> &out) { write_bytes(out.data(), out.size()); }

void write_end(bool clean, uint8_t flags) {
  tseal::EndRecord end{unix_now(), S().events_written, clean, flags};
  uint8_t payload[tseal::EndRecord::kMaxBytes];
  uint8_t chunk[tseal::kChunkHeaderSize + tseal::EndRecord::kMaxBytes];
  write_bytes(chunk, tseal::put_chunk(chunk, Chunk::End, payload, end.encode(payload)));
}

void close() {
  State &s = S();
  if (g_file_ok.load()) segments::finish();  // the last segment's index entry
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  g_file_ok.store(false);
}

const std::string &path() { return S().path; }

void reset_after_fork() {
  State &s = S();
  segments::reset_after_fork();
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  g_file_ok.store(false);
  for (auto &c : s.stack_cursor) c = 0;
  s.py_cursor = 0;
  new (&s.py_strings) std::unordered_map<std::string, uint32_t>();
  s.modules_adds = s.modules_subs = ~0ull;
  s.events_written = 0;
}

}  // namespace file
}  // namespace torchseal::history
