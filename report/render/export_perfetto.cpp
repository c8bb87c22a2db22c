#include "report/render/export_perfetto.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

#include "report/render/pickle_writer.h"  // sanitize_utf8
#include "report/replay/replay.h"

namespace torchseal {
namespace {

const std::function<void(uint64_t, uint64_t)> *g_progress_fn = nullptr;
void progress_trampoline(uint64_t done, uint64_t total) {
  if (g_progress_fn && *g_progress_fn) (*g_progress_fn)(done, total);
}

std::string json_string(std::string_view s) {
  std::string clean = sanitize_utf8(s), out = "\"";
  for (char c : clean) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string human_bytes(uint64_t n) {
  static const char *const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

std::string device_label(int16_t d) { return d < 0 ? "host" : "cuda:" + std::to_string(d); }

// A live record's tag is its slice id: 0 = no slice (below the threshold).
class PerfettoObserver : public ReplayObserver {
 public:
  PerfettoObserver(FILE *f, const PerfettoOptions &opts) : f_(f), opts_(opts) {
    std::fputs("{\"displayTimeUnit\": \"ns\", \"traceEvents\": [\n", f_);
  }

  void on_process(const ProcessInfo &p, double) override {
    pid_ = p.pid;
    std::string name = "torchseal";
    if (!p.argv.empty()) name += ": " + p.argv[0];
    name += " (pid " + std::to_string(p.pid) + ")";
    begin();
    std::fprintf(f_,
                 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%" PRId64
                 ",\"tid\":0,\"args\":{\"name\":%s}}",
                 pid_, json_string(name).c_str());
  }

  void on_event(const Event &e) override {
    ++events_;
    if (!have_t0_) {
      t0_ = e.time_ns;
      have_t0_ = true;
    }
    last_ = std::max(last_, e.time_ns);
    switch (e.op) {
      case Op::OomFail:
        instant(
            e,
            "OOM " + std::string(api_name(e.api)) + " " + human_bytes(e.size) + " on " +
                device_label(e.device),
            "\"requested\":" + std::to_string(e.size) + ",\"device\":" + std::to_string(e.device));
        break;
      case Op::InvalidFree:
        instant(e, "invalid free " + std::string(api_name(e.api)) + " " + hex(e.addr),
                "\"address\":\"" + hex(e.addr) + "\"");
        break;
      case Op::Teardown:
        instant(
            e, "teardown " + std::string(api_name(e.api)) + " " + device_label(e.device),
            "\"device\":" + std::to_string(e.device) + ",\"context\":" + std::to_string(e.context));
        break;
      case Op::Step: {
        // Without explicit steps the shim closes time windows instead.
        bool window = (e.size & kWindowStepBit) != 0;
        std::string n = std::to_string(e.size & ~kWindowStepBit);
        instant(e, (window ? "window " : "step ") + n,
                std::string(window ? "\"window\":" : "\"step\":") + n);
        break;
      }
      case Op::Mark: {
        std::string label = replay_->label(e.size);
        instant(e, "mark " + label, "\"label\":" + json_string(label));
        break;
      }
      case Op::Dump: {
        std::string trigger(dump_trigger_name(e.size));
        instant(e, "dump (" + trigger + ")", "\"trigger\":" + json_string(trigger));
        break;
      }
      default:
        break;  // allocations below; VMM map/unmap/reserve: address space, not memory
    }
  }

  uint64_t on_alloc(const Event &e) override {
    live_bytes_[{e.device, e.family}] += e.size;
    counter(e.device, e.family, e.time_ns);
    if (e.size < opts_.min_slice_bytes) return 0;
    uint64_t slice_id = ++next_slice_;
    begin();
    std::fprintf(f_,
                 "{\"name\":%s,\"cat\":\"allocation\",\"ph\":\"b\",\"id\":\"0x%" PRIx64
                 "\",\"ts\":%s,\"pid\":%" PRId64
                 ",\"tid\":%u,\"args\":{\"address\":\"%s\",\"size\":%" PRIu64
                 ",\"device\":%d,\"kind\":\"%s\",\"api\":\"%s\",\"stack\":%u}}",
                 json_string(slice_name(e)).c_str(), slice_id, ts(e.time_ns).c_str(), pid_, e.tid,
                 hex(e.addr).c_str(), e.size, e.device, std::string(family_name(e.family)).c_str(),
                 std::string(api_name(e.api)).c_str(), e.stack);
    return slice_id;
  }

  void on_release(const Event &e, const ReplayRecord &r) override {
    const Event &a = r.alloc;
    uint64_t &v = live_bytes_[{a.device, a.family}];
    v = v >= a.size ? v - a.size : 0;
    counter(a.device, a.family, e.time_ns);
    if (r.tag) slice_end(r, e.time_ns);
  }

  void on_teardown(const Event &e, const std::vector<const ReplayRecord *> &dying) override {
    // Deterministic output: the order allocations were made in.
    std::vector<const ReplayRecord *> order = dying;
    std::sort(order.begin(), order.end(), [](const ReplayRecord *x, const ReplayRecord *y) {
      return x->tag != y->tag ? x->tag < y->tag : x->alloc.addr < y->alloc.addr;
    });
    for (const ReplayRecord *r : order) on_release(e, *r);
  }

  bool finish(const Replay &replay) {
    // Allocations still live: their slices end with the trace.
    std::vector<const ReplayRecord *> open;
    replay.for_each_live([&](const ReplayRecord &r) {
      if (r.tag) open.push_back(&r);
    });
    std::sort(open.begin(), open.end(),
              [](const ReplayRecord *a, const ReplayRecord *b) { return a->tag < b->tag; });
    for (const ReplayRecord *r : open) slice_end(*r, last_);
    std::fputs("\n]}\n", f_);
    return std::fflush(f_) == 0 && !std::ferror(f_);
  }

  uint64_t written() const { return written_; }
  uint64_t events() const { return events_; }

 private:
  static std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
    return buf;
  }

  void begin() {
    if (written_++) std::fputs(",\n", f_);
  }
  // Exact microseconds with ns precision, relative to the first event.
  std::string ts(uint64_t t) const {
    uint64_t rel = t >= t0_ ? t - t0_ : 0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%" PRIu64 ".%03" PRIu64, rel / 1000, rel % 1000);
    return buf;
  }

  void counter(int16_t device, Family f, uint64_t t) {
    uint64_t v = live_bytes_[{device, f}];
    begin();
    std::fprintf(f_,
                 "{\"name\":\"live bytes %s %s\",\"ph\":\"C\",\"ts\":%s,\"pid\":%" PRId64
                 ",\"tid\":0,\"args\":{\"bytes\":%" PRIu64 "}}",
                 device_label(device).c_str(), std::string(family_name(f)).c_str(), ts(t).c_str(),
                 pid_, v);
  }

  void instant(const Event &e, const std::string &name, const std::string &args) {
    begin();
    std::fprintf(f_,
                 "{\"name\":%s,\"ph\":\"i\",\"s\":\"g\",\"ts\":%s,\"pid\":%" PRId64
                 ",\"tid\":%u,\"args\":{%s}}",
                 json_string(name).c_str(), ts(e.time_ns).c_str(), pid_, e.tid, args.c_str());
  }

  std::string slice_name(const Event &a) const {
    return std::string(api_name(a.api)) + " " + human_bytes(a.size);
  }
  void slice_end(const ReplayRecord &r, uint64_t t) {
    begin();
    std::fprintf(f_,
                 "{\"name\":%s,\"cat\":\"allocation\",\"ph\":\"e\",\"id\":\"0x%" PRIx64
                 "\",\"ts\":%s,\"pid\":%" PRId64 ",\"tid\":%u}",
                 json_string(slice_name(r.alloc)).c_str(), r.tag, ts(t).c_str(), pid_, r.alloc.tid);
  }

  FILE *f_;
  const PerfettoOptions &opts_;
  int64_t pid_ = 0;
  uint64_t t0_ = 0, last_ = 0;
  bool have_t0_ = false;
  uint64_t written_ = 0, events_ = 0, next_slice_ = 0;
  std::map<std::pair<int16_t, Family>, uint64_t> live_bytes_;
};

}  // namespace

bool export_perfetto(const std::string &history_path, const std::string &out_path,
                     const PerfettoOptions &opts, ExportStats &stats, std::string &error,
                     std::vector<std::string> &warnings) {
  stats = ExportStats{};
  std::string tmp = out_path + ".tmp";
  std::vector<char> vbuf(1 << 16);  // outlives the FILE: fclose is below
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    error = "cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  std::setvbuf(f, vbuf.data(), _IOFBF, vbuf.size());
  PerfettoObserver out(f, opts);
  g_progress_fn = &opts.progress;
  Replay replay(out);
  bool read = replay_file(history_path, replay, &opts.window, error, warnings, nullptr,
                          &progress_trampoline);
  g_progress_fn = nullptr;
  bool ok = read && out.finish(replay);
  long size = std::ftell(f);
  ok = std::fclose(f) == 0 && ok;
  if (!read) {
    std::remove(tmp.c_str());
    return false;
  }
  if (!ok || std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    error = "cannot write " + out_path + ": " + std::strerror(errno ? errno : EIO);
    std::remove(tmp.c_str());
    return false;
  }
  stats.events = out.events();
  stats.entries = out.written();
  stats.bytes = size > 0 ? static_cast<uint64_t>(size) : 0;
  return true;
}

}  // namespace torchseal
