#include "report/render/export_memory_viz.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "common/symbols/symbolizer.h"
#include "report/analysis/site.h"
#include "report/render/pickle_writer.h"
#include "report/replay/replay.h"

namespace torchseal {
namespace {

// ---- progress over several read passes -------------------------------------
//
// read_history takes a plain function pointer, so the current callback and
// the pass being read live here. Exports run one at a time in the CLI.
struct ProgressState {
  const std::function<void(uint64_t, uint64_t)> *fn = nullptr;
  int pass = 0, passes = 1;
  uint64_t file_size = 0;
};
ProgressState g_progress;

void progress_trampoline(uint64_t done, uint64_t total) {
  if (!g_progress.fn || !*g_progress.fn) return;
  g_progress.file_size = total;
  (*g_progress.fn)(static_cast<uint64_t>(g_progress.pass) * total + done,
                   static_cast<uint64_t>(g_progress.passes) * total);
}

// ---- the pickle vocabulary ---------------------------------------------------

// Every string used as a key or as an enumerated value. Trace entries only use
// the first kTraceKeys, so each device's scope can reserve them below 256 and
// reference them with 2-byte BINGETs.
enum Key : int {
  kAction,
  kAddr,
  kSize,
  kStream,
  kTimeUs,
  kFrames,
  kDeviceFree,
  kFilename,
  kLine,
  kName,
  kVAlloc,
  kVFreeRequested,
  kVFreeCompleted,
  kVSegmentAlloc,
  kVSegmentFree,
  kVOom,
  kTraceKeys,  // --- below: segments only
  kDevice = kTraceKeys,
  kAddress,
  kTotalSize,
  kSegmentType,
  kAllocatedSize,
  kActiveSize,
  kRequestedSize,
  kBlocks,
  kState,
  kVLarge,
  kVActiveAllocated,
  kNumKeys
};
constexpr const char *kKeyText[kNumKeys] = {"action",
                                            "addr",
                                            "size",
                                            "stream",
                                            "time_us",
                                            "frames",
                                            "device_free",
                                            "filename",
                                            "line",
                                            "name",
                                            "alloc",
                                            "free_requested",
                                            "free_completed",
                                            "segment_alloc",
                                            "segment_free",
                                            "oom",
                                            "device",
                                            "address",
                                            "total_size",
                                            "segment_type",
                                            "allocated_size",
                                            "active_size",
                                            "requested_size",
                                            "blocks",
                                            "state",
                                            "large",
                                            "active_allocated"};
static_assert(kTraceKeys == 16);
constexpr int kReservedScopes = 256 / kTraceKeys;  // devices 0..15 get 2-byte key GETs

enum class Action : uint8_t { SegmentAlloc, Alloc, FreeRequested, FreeCompleted, SegmentFree, Oom };
Key action_key(Action a) {
  switch (a) {
    case Action::SegmentAlloc:
      return kVSegmentAlloc;
    case Action::Alloc:
      return kVAlloc;
    case Action::FreeRequested:
      return kVFreeRequested;
    case Action::FreeCompleted:
      return kVFreeCompleted;
    case Action::SegmentFree:
      return kVSegmentFree;
    case Action::Oom:
      return kVOom;
  }
  return kVAlloc;
}

struct VizFrame {
  std::string filename, name;
  int line = 0;
};

// One memo scope: everything a scope PUTs is only GOT inside the same scope,
// because scopes (one spool per device, then the segments) are written
// interleaved but land in the file one after another.
struct Scope {
  uint32_t key_id[kNumKeys];
  bool key_done[kNumKeys] = {};
  std::unordered_map<std::string, uint32_t> strings;   // filename / function name
  std::unordered_map<uint32_t, uint32_t> frame_dicts;  // interned frame -> memo id
  std::unordered_map<uint64_t, uint32_t> frame_lists;  // (stack, pystack)
};

// ---- live state --------------------------------------------------------------

struct LiveRec {
  uint64_t shown_addr = 0;  // address in the snapshot (synthetic for VMM)
  uint64_t size = 0;
  StackId stack = 0;
  PyStackId pystack = 0;
  uint32_t context = 0;
  int16_t raw_device = -1;  // as recorded, for teardown matching
  int shown_device = 0;
};

bool shown_family(Family f) {
  return f == Family::Device || f == Family::StreamOrdered || f == Family::Managed ||
         f == Family::Vmm || f == Family::Graph;
}

// ---- what both passes learn and share ------------------------------------------

struct Meta {
  ProcessInfo process;
  double clock_base = 0;
  bool have_process = false;
  std::vector<Module> modules;
  std::unordered_map<StackId, std::vector<uint64_t>> stacks;
  std::unordered_map<PyStackId, std::vector<PyFrame>> pystacks;
  std::vector<std::pair<uint64_t, std::vector<NativeFrame>>> symbols;
  int max_device = -1;
};

// ---- pass 2 output -------------------------------------------------------------

class Output {
 public:
  Output(const std::string &out_path, Symbolizer &sym, const Meta &meta)
      : out_path_(out_path), sym_(sym), meta_(meta) {
    clock_base_us_ = std::llround(meta.clock_base * 1e6);
  }

  bool open_spools(int devices, std::string &error) {
    for (int d = 0; d < devices; ++d) {
      auto s = std::make_unique<Spool>();
      std::string path = out_path_ + ".spool" + std::to_string(d);
      s->file = std::fopen(path.c_str(), "w+b");
      if (!s->file) {
        error = "cannot create temporary file " + path + ": " + std::strerror(errno);
        return false;
      }
      // Unlinked at once: the space is reclaimed even if we are killed.
      unlink(path.c_str());
      s->w = std::make_unique<PickleWriter>(s->file);
      s->batch = std::make_unique<ListBatcher>(*s->w);
      init_scope(s->scope, d < kReservedScopes ? d * kTraceKeys : -1);
      spools_.push_back(std::move(s));
    }
    return true;
  }

  // Opens one trace entry in `device`'s list, up to its action key.
  auto &begin_entry(int device) {  // a Spool (declared below)
    Spool &s = *spools_[static_cast<size_t>(device)];
    s.batch->item();
    s.w->empty_dict();
    s.w->mark();
    key(*s.w, s.scope, kAction);
    return s;
  }

  void trace(int device, Action a, uint64_t addr, uint64_t size, uint64_t t_ns, StackId stack,
             PyStackId pystack) {
    Spool &s = begin_entry(device);
    PickleWriter &w = *s.w;
    key(w, s.scope, action_key(a));
    if (a == Action::Oom) {
      // Free device memory at the OOM is not recorded.
      key(w, s.scope, kDeviceFree);
      w.integer(0);
    } else {
      key(w, s.scope, kAddr);
      w.integer(addr);
    }
    size_stream_time(w, s.scope, size, t_ns);
    key(w, s.scope, kFrames);
    frames(w, s.scope, stack, pystack);
    w.setitems();
    ++entries_;
  }

  // The keys every trace entry has after its action and address.
  void size_stream_time(PickleWriter &w, Scope &scope, uint64_t size, uint64_t t_ns) {
    key(w, scope, kSize);
    w.integer(size);
    key(w, scope, kStream);
    w.integer(0);
    key(w, scope, kTimeUs);
    w.integer(clock_base_us_ + static_cast<int64_t>(t_ns / 1000));
  }

  // A user mark: the format has no annotation entry, so it is a `snapshot`
  // entry (the viewer lists it and changes no state) whose one frame names
  // the label. Only files with marks have one, so the vocabulary above and
  // every other file stay as they were.
  void mark(int device, uint64_t t_ns, const std::string &label) {
    Spool &s = begin_entry(device);
    PickleWriter &w = *s.w;
    memo_string(w, s.scope, "snapshot");
    key(w, s.scope, kAddr);
    w.integer(0);
    size_stream_time(w, s.scope, 0, t_ns);
    key(w, s.scope, kFrames);
    w.empty_list();
    w.mark();
    w.empty_dict();
    w.mark();
    key(w, s.scope, kFilename);
    memo_string(w, s.scope, "torchseal_mark");
    key(w, s.scope, kLine);
    w.integer(0);
    key(w, s.scope, kName);
    memo_string(w, s.scope, label);
    w.setitems();
    w.appends();
    w.setitems();
    ++entries_;
  }

  // Assembles the file from the spools and the final live state.
  bool finish(const std::vector<LiveRec> &live, ExportStats &stats, std::string &error) {
    std::string tmp = out_path_ + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f) {
      error = "cannot create " + tmp + ": " + std::strerror(errno);
      return false;
    }
    bool ok = true;
    {
      PickleWriter w(f);
      w.proto(4);
      w.empty_dict();
      w.mark();

      w.string("device_traces");
      w.empty_list();
      ListBatcher devices(w);
      for (auto &s : spools_) {
        devices.item();
        s->batch->finish();
        ok = s->w->flush() && ok;
        w.empty_list();
        ok = copy_spool(s->file, w) && ok;
      }
      devices.finish();

      w.string("segments");
      w.empty_list();
      ListBatcher segs(w);
      Scope scope;
      init_scope(scope, -1);
      for (const LiveRec &r : live) {
        segs.item();
        segment(w, scope, r);
      }
      segs.finish();

      w.setitems();
      w.stop();
      ok = w.flush() && ok;
      stats.bytes = w.bytes_written();
      stats.segments = live.size();
    }
    ok = std::fflush(f) == 0 && ok;
    ok = std::fclose(f) == 0 && ok;
    spools_.clear();
    if (!ok || std::rename(tmp.c_str(), out_path_.c_str()) != 0) {
      error = "cannot write " + out_path_ + ": " + std::strerror(errno ? errno : EIO);
      std::remove(tmp.c_str());
      return false;
    }
    stats.entries = entries_;
    return true;
  }

 private:
  struct Spool {
    FILE *file = nullptr;
    std::unique_ptr<PickleWriter> w;
    std::unique_ptr<ListBatcher> batch;
    Scope scope;
    ~Spool() {
      batch.reset();
      w.reset();  // its final flush must precede the close
      if (file) std::fclose(file);
    }
  };

  void init_scope(Scope &s, int reserved_base) {
    for (int k = 0; k < kNumKeys; ++k) {
      s.key_id[k] = reserved_base >= 0 && k < kTraceKeys ? static_cast<uint32_t>(reserved_base + k)
                                                         : next_memo_++;
    }
  }

  static bool copy_spool(FILE *spool, PickleWriter &w) {
    if (std::fseek(spool, 0, SEEK_SET) != 0) return false;
    std::vector<char> buf(1 << 20);
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), spool)) > 0) w.raw(buf.data(), n);
    return !std::ferror(spool);
  }

  void key(PickleWriter &w, Scope &s, Key k) {
    if (s.key_done[k]) {
      w.get(s.key_id[k]);
    } else {
      w.string(kKeyText[k]);
      w.put(s.key_id[k]);
      s.key_done[k] = true;
    }
  }

  void memo_string(PickleWriter &w, Scope &s, const std::string &str) {
    auto it = s.strings.find(str);
    if (it != s.strings.end()) {
      w.get(it->second);
      return;
    }
    uint32_t id = next_memo_++;
    w.string(str);
    w.put(id);
    s.strings.emplace(str, id);
  }

  // Distinct frames are held once and stacks as indices into them: a history
  // with thousands of deep stacks repeats the same few frames, and a copy of
  // their strings per stack was the export's largest memory.
  uint32_t intern_frame(VizFrame &&f) {
    f.filename = sanitize_utf8(f.filename);
    f.name = sanitize_utf8(f.name);
    std::string key = f.filename + '\0' + std::to_string(f.line) + '\0' + f.name;
    auto [it, fresh] = frame_ids_.emplace(std::move(key), uint32_t(viz_frames_.size()));
    if (fresh) viz_frames_.push_back(std::move(f));
    return it->second;
  }

  const std::vector<uint32_t> &frames_of(StackId stack, PyStackId pystack) {
    uint64_t k = (static_cast<uint64_t>(stack) << 32) | pystack;
    auto it = frame_cache_.find(k);
    if (it != frame_cache_.end()) return it->second;
    std::vector<uint32_t> out;
    auto st = meta_.stacks.find(stack);
    if (stack && st != meta_.stacks.end()) {
      for (const NativeFrame &nf : trim_frames(sym_.symbolize_stack(st->second))) {
        VizFrame f;
        if (!nf.function.empty()) {
          f.name = nf.function;
        } else {
          char hex[32];
          std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(nf.address));
          f.name = hex;
        }
        f.filename = !nf.file.empty() ? nf.file : !nf.module.empty() ? nf.module : "??";
        f.line = nf.line;
        out.push_back(intern_frame(std::move(f)));
      }
    }
    // Python frames after the native ones: both innermost first, and the
    // native stack is the deeper one (it ends in the CUDA call).
    if (auto py = meta_.pystacks.find(pystack); pystack && py != meta_.pystacks.end()) {
      for (const PyFrame &p : py->second) {
        VizFrame f;
        f.name = p.function.empty() ? "??" : p.function;
        f.filename = p.file.empty() ? "??" : p.file;
        f.line = p.line;
        out.push_back(intern_frame(std::move(f)));
      }
    }
    return frame_cache_.emplace(k, std::move(out)).first->second;
  }

  // The frames list of (stack, pystack): written once per scope, then a GET.
  void frames(PickleWriter &w, Scope &s, StackId stack, PyStackId pystack) {
    uint64_t k = (static_cast<uint64_t>(stack) << 32) | pystack;
    auto it = s.frame_lists.find(k);
    if (it != s.frame_lists.end()) {
      w.get(it->second);
      return;
    }
    const std::vector<uint32_t> &fr = frames_of(stack, pystack);
    w.empty_list();
    if (fr.empty()) return;  // 1 byte: cheaper than a memo entry
    uint32_t id = next_memo_++;
    w.put(id);
    s.frame_lists.emplace(k, id);
    ListBatcher b(w);
    for (uint32_t frame : fr) {
      b.item();
      auto fd = s.frame_dicts.find(frame);
      if (fd != s.frame_dicts.end()) {
        w.get(fd->second);
        continue;
      }
      const VizFrame &f = viz_frames_[frame];
      uint32_t fid = next_memo_++;
      w.empty_dict();
      w.put(fid);
      w.mark();
      key(w, s, kFilename);
      memo_string(w, s, f.filename);
      key(w, s, kLine);
      w.integer(static_cast<int64_t>(f.line));
      key(w, s, kName);
      memo_string(w, s, f.name);
      w.setitems();
      s.frame_dicts.emplace(frame, fid);
    }
    b.finish();
  }

  // One `key: integer` pair of a dict being written.
  template <class V>  // each value keeps its own PickleWriter::integer overload
  void int_item(PickleWriter &w, Scope &s, Key k, V v) {
    key(w, s, k);
    w.integer(v);
  }

  void segment(PickleWriter &w, Scope &s, const LiveRec &r) {
    w.empty_dict();
    w.mark();
    int_item(w, s, kDevice, static_cast<int64_t>(r.shown_device));
    int_item(w, s, kAddress, r.shown_addr);
    int_item(w, s, kTotalSize, r.size);
    int_item(w, s, kStream, 0);
    key(w, s, kSegmentType);
    key(w, s, kVLarge);
    int_item(w, s, kAllocatedSize, r.size);
    int_item(w, s, kActiveSize, r.size);
    int_item(w, s, kRequestedSize, r.size);
    key(w, s, kFrames);
    frames(w, s, r.stack, r.pystack);
    key(w, s, kBlocks);
    w.empty_list();
    w.mark();
    w.empty_dict();
    w.mark();
    int_item(w, s, kSize, r.size);
    int_item(w, s, kRequestedSize, r.size);
    int_item(w, s, kAddress, r.shown_addr);
    key(w, s, kState);
    key(w, s, kVActiveAllocated);
    key(w, s, kFrames);
    frames(w, s, r.stack, r.pystack);
    w.setitems();
    w.appends();
    w.setitems();
  }

  std::string out_path_;
  Symbolizer &sym_;
  const Meta &meta_;
  int64_t clock_base_us_ = 0;
  std::vector<std::unique_ptr<Spool>> spools_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> frame_cache_;  // (stack, pystack)
  std::vector<VizFrame> viz_frames_;
  std::unordered_map<std::string, uint32_t> frame_ids_;  // filename, line, name -> index
  uint32_t next_memo_ = 256;  // 0..255: per-device trace keys (init_scope)
  uint64_t entries_ = 0;
};

// ---- the replay, shared by both passes ----------------------------------------
//
// Pass 1 (out == nullptr) collects metadata and counts entries; pass 2 writes.
// Both run the same state machine, so pass 1's count and device range are
// exactly what pass 2 produces. A live record's tag is its snapshot address
// with kShown set, or 0 for an allocation the snapshot leaves out.
constexpr uint64_t kShown = 1ull << 63;

class VizObserver : public ReplayObserver {
 public:
  VizObserver(const MemoryVizOptions &opts, Meta &meta, Output *out, uint64_t cutoff)
      : opts_(opts), meta_(meta), out_(out), cutoff_(cutoff) {}

  void on_process(const ProcessInfo &p, double clock_base) override {
    if (!out_) {
      meta_.process = p;
      meta_.clock_base = clock_base;
      meta_.have_process = true;
    }
    // Window bounds in the events' CLOCK_MONOTONIC nanoseconds.
    auto to_ns = [&](double unix_s) -> uint64_t {
      double ns = (unix_s - clock_base) * 1e9;
      return ns <= 0 ? 0 : ns >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(ns);
    };
    if (opts_.since.set) since_ns_ = to_ns(opts_.since.resolve(p.start_time));
    if (opts_.until.set) until_ns_ = to_ns(opts_.until.resolve(p.start_time));
  }
  void on_modules(const std::vector<Module> &mods) override {
    if (out_) return;
    // The map is re-sent whole when it changes; keep every object ever seen
    // so addresses of since-unloaded libraries still resolve.
    for (const Module &m : mods) {
      bool dup = std::any_of(meta_.modules.begin(), meta_.modules.end(), [&](const Module &o) {
        return o.path == m.path && o.base == m.base && o.lo == m.lo;
      });
      if (!dup) meta_.modules.push_back(m);
    }
  }
  void on_stack(StackId id, std::vector<uint64_t> &&ips) override {
    if (!out_) meta_.stacks[id] = std::move(ips);
  }
  void on_pystack(PyStackId id, std::vector<PyFrame> &&frames) override {
    if (!out_) meta_.pystacks[id] = std::move(frames);
  }
  void on_symbol(uint64_t ip, std::vector<NativeFrame> &&frames) override {
    if (!out_) meta_.symbols.emplace_back(ip, std::move(frames));
  }

  // The snapshot is the state at `until`.
  bool wants(const Event &e) override { return e.time_ns <= until_ns_; }

  void on_event(const Event &e) override {
    in_window_ = e.time_ns >= since_ns_;
    event_first_ = entries_;
    switch (e.op) {
      case Op::Alloc:
      case Op::Free:
      case Op::Teardown:
        ++events_;
        break;
      case Op::OomFail:
        oom(e);
        break;
      case Op::Mark:
        mark(e);
        break;
      default:
        break;  // invalid frees change nothing; VMM ranges, steps, dumps: not shown
    }
  }

  uint64_t on_alloc(const Event &e) override {
    int dev = shown_device(e.device);
    if (!shown_family(e.family) || !device_selected(dev) || e.size == 0) return 0;
    uint64_t addr = e.addr;
    if (e.family == Family::Vmm) {
      addr = vmm_next_;
      constexpr uint64_t kGranule = 2u << 20;
      vmm_next_ += (e.size + kGranule - 1) / kGranule * kGranule;
    }
    emit(dev, Action::SegmentAlloc, addr, e.size, e.time_ns, e.stack, e.pystack);
    emit(dev, Action::Alloc, addr, e.size, e.time_ns, e.stack, e.pystack);
    return addr | kShown;
  }

  // A free, a reuse without a recorded free (the trace never holds two
  // blocks at one address), or a teardown.
  void on_release(const Event &e, const ReplayRecord &r) override {
    if (r.tag) emit_free(view(r), e.time_ns);
  }

  void on_teardown(const Event &e, const std::vector<const ReplayRecord *> &dying) override {
    std::vector<LiveRec> shown;
    for (const ReplayRecord *r : dying)
      if (r->tag) shown.push_back(view(*r));
    std::sort(shown.begin(), shown.end(), by_place);
    for (const LiveRec &r : shown) emit_free(r, e.time_ns);
  }

  // Final state, ordered by (device, address) for a deterministic file.
  static std::vector<LiveRec> live(const Replay &replay) {
    std::vector<LiveRec> v;
    replay.for_each_live([&](const ReplayRecord &r) {
      if (r.tag) v.push_back(view(r));
    });
    std::sort(v.begin(), v.end(), by_place);
    return v;
  }

  uint64_t entries() const { return entries_; }
  uint64_t events() const { return events_; }

 private:
  static bool by_place(const LiveRec &a, const LiveRec &b) {
    return a.shown_device != b.shown_device ? a.shown_device < b.shown_device
                                            : a.shown_addr < b.shown_addr;
  }
  static LiveRec view(const ReplayRecord &r) {
    LiveRec v;
    v.shown_addr = r.tag & ~kShown;
    v.size = r.alloc.size;
    v.stack = r.alloc.stack;
    v.pystack = r.alloc.pystack;
    v.context = r.alloc.context;
    v.raw_device = r.alloc.device;
    v.shown_device = shown_device(r.alloc.device);
    return v;
  }
  static int shown_device(int16_t d) { return d < 0 ? 0 : d; }
  bool device_selected(int d) const { return opts_.device < 0 || d == opts_.device; }

  void emit(int device, Action a, uint64_t addr, uint64_t size, uint64_t t, StackId stack,
            PyStackId pystack) {
    if (!in_window_) return;
    ++entries_;
    meta_device(device);
    // Whole events only: an event is kept iff its first entry is past the
    // cutoff, so a kept allocation always has both its entries.
    if (out_ && event_first_ >= cutoff_) out_->trace(device, a, addr, size, t, stack, pystack);
  }
  void meta_device(int d) {
    if (!out_) meta_.max_device = std::max(meta_.max_device, d);
  }

  void emit_free(const LiveRec &r, uint64_t t) {
    emit(r.shown_device, Action::FreeRequested, r.shown_addr, r.size, t, r.stack, r.pystack);
    emit(r.shown_device, Action::FreeCompleted, r.shown_addr, r.size, t, r.stack, r.pystack);
    emit(r.shown_device, Action::SegmentFree, r.shown_addr, r.size, t, r.stack, r.pystack);
  }

  // A mark belongs to no device: it is shown on device 0's trace, so an
  // export of another single device (--device) leaves it out.
  void mark(const Event &e) {
    const int dev = 0;
    if (!in_window_ || !device_selected(dev)) return;
    ++entries_;
    meta_device(dev);
    if (out_ && event_first_ >= cutoff_) out_->mark(dev, e.time_ns, replay_->label(e.size));
  }

  void oom(const Event &e) {
    ++events_;
    int dev = shown_device(e.device);
    if (!shown_family(e.family) || !device_selected(dev)) return;
    emit(dev, Action::Oom, 0, e.size, e.time_ns, e.stack, e.pystack);
  }

  const MemoryVizOptions &opts_;
  Meta &meta_;
  Output *out_;
  uint64_t cutoff_;
  uint64_t since_ns_ = 0, until_ns_ = UINT64_MAX;
  bool in_window_ = true;
  uint64_t entries_ = 0, event_first_ = 0, events_ = 0;
  uint64_t vmm_next_ = 1ull << 52;
};

bool read_pass(const std::string &path, Replay &replay, const HistoryWindow &window, int pass,
               std::string &error, std::vector<std::string> *warnings) {
  g_progress.pass = pass;
  std::vector<std::string> w;
  bool ok = replay_file(path, replay, &window, error, w, nullptr, &progress_trampoline);
  // Both passes see the same damage: report it once.
  if (warnings) warnings->insert(warnings->end(), w.begin(), w.end());
  return ok;
}

}  // namespace

bool export_memory_viz(const std::string &history_path, const std::string &out_path,
                       const MemoryVizOptions &opts, ExportStats &stats, std::string &error,
                       std::vector<std::string> &warnings) {
  stats = ExportStats{};
  g_progress = ProgressState{};
  g_progress.fn = &opts.progress;
  g_progress.passes = 2;

  // Pass 1: process info, modules, stacks, symbols, and the entry count.
  Meta meta;
  VizObserver count(opts, meta, nullptr, 0);
  Replay count_replay(count);
  if (!read_pass(history_path, count_replay, opts.window, 0, error, &warnings)) return false;
  for (const LiveRec &r : VizObserver::live(count_replay))
    meta.max_device = std::max(meta.max_device, r.shown_device);
  int devices = opts.device >= 0 ? opts.device + 1 : std::max(meta.max_device + 1, 1);
  uint64_t total = count.entries();
  uint64_t cutoff = opts.max_entries && total > opts.max_entries ? total - opts.max_entries : 0;

  Symbolizer sym(meta.modules);
  for (auto &[ip, frames] : meta.symbols) sym.preload(ip, std::move(frames));
  meta.symbols.clear();

  // Pass 2: the same replay, writing.
  Output out(out_path, sym, meta);
  if (!out.open_spools(devices, error)) return false;
  VizObserver write(opts, meta, &out, cutoff);
  Replay write_replay(write);
  if (!read_pass(history_path, write_replay, opts.window, 1, error, nullptr)) return false;
  if (!out.finish(VizObserver::live(write_replay), stats, error)) return false;
  stats.events = write.events();
  stats.devices = devices;
  g_progress = ProgressState{};
  return true;
}

}  // namespace torchseal
