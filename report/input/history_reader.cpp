#include "report/input/history_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "report/format/event_codec.h"
#include "report/format/records.h"
#include "report/format/tseal_format.h"

namespace torchseal {
namespace {

using tseal::ByteReader;
using tseal::Chunk;

struct FileCloser {
  void operator()(FILE *f) const {
    if (f) fclose(f);
  }
};

struct PendingEvent {
  Event e;
  uint64_t seq;  // file order, to keep the sort stable and deterministic
};

class Reader {
 public:
  Reader(HistorySink &sink, std::vector<std::string> &warnings, const std::string &path)
      : sink_(sink), warnings_(warnings), path_(path) {}

  bool chunk(Chunk type, const uint8_t *p, size_t n) {
    ByteReader r(p, n);
    switch (type) {
      case Chunk::Process:
        return process(r);
      case Chunk::Modules:
        return modules(r);
      case Chunk::Stacks:
        return stacks(r);
      case Chunk::PyStacks:
        return pystacks(r);
      case Chunk::Events:
        return events(r);
      case Chunk::Pass:
        flush_pass();
        return true;
      case Chunk::Symbols:
        return symbols(r);
      case Chunk::End:
        return end(r);
      case Chunk::Labels:
        return labels(r);
      case Chunk::Verdict:
        return verdict(r);
    }
    return true;  // a newer writer's chunk type: skipped (docs/tseal-format.md)
  }

  void finish() { flush_pass(); }
  uint64_t events() const { return events_; }
  bool clean() const { return clean_; }

 private:
  bool process(ByteReader &r) {
    tseal::ProcessRecord rec;
    if (!rec.decode(r)) return false;
    sink_.on_process(rec.info, rec.clock_base);
    return true;
  }

  bool modules(ByteReader &r) {
    tseal::ModulesRecord rec;
    if (!rec.decode(r)) return false;
    sink_.on_modules(rec.modules);
    return true;
  }

  bool stacks(ByteReader &r) {
    tseal::StacksRecord rec;
    if (!rec.decode(r)) return false;
    for (auto &[id, ips] : rec.stacks) sink_.on_stack(id, std::move(ips));
    return true;
  }

  // String ids refer to this chunk's strings or an earlier chunk's.
  bool pystacks(ByteReader &r) {
    tseal::PyStacksRecord rec;
    if (!rec.decode(r)) return false;
    for (auto &[id, str] : rec.strings) {
      if (py_strings_.size() <= id) py_strings_.resize(id + 1);
      py_strings_[id] = std::move(str);
    }
    for (auto &[id, refs] : rec.stacks) {
      std::vector<PyFrame> frames;
      frames.reserve(refs.size());
      for (const auto &f : refs) {
        if (f.function >= py_strings_.size() || f.file >= py_strings_.size()) return false;
        frames.push_back({py_strings_[f.function], py_strings_[f.file], static_cast<int>(f.line)});
      }
      sink_.on_pystack(id, std::move(frames));
    }
    return true;
  }

  bool events(ByteReader &r) {
    tseal::EventsHeader h;
    if (!h.decode(r)) return false;
    tseal::CodecState st;
    st.reset(h.base_time);
    Event e;
    uint64_t got = 0;
    while (tseal::decode_event(r, st, e)) {
      e.tid = h.tid;
      pending_.push_back({e, seq_++});
      ++got;
    }
    return r.ok() && got == h.count;
  }

  bool symbols(ByteReader &r) {
    tseal::SymbolsRecord rec;
    if (!rec.decode(r)) return false;
    for (auto &[ip, frames] : rec.ips) sink_.on_symbol(ip, std::move(frames));
    return true;
  }

  bool labels(ByteReader &r) {
    tseal::LabelsRecord rec;
    if (!rec.decode(r)) return false;
    for (auto &[id, label] : rec.labels) sink_.on_label(id, std::move(label));
    return true;
  }

  // Written after the last pass: its OOMs refer to events already read.
  bool verdict(ByteReader &r) {
    tseal::VerdictRecord rec;
    if (!rec.decode(r)) return false;
    flush_pass();
    sink_.on_verdict(std::move(rec));
    return true;
  }

  bool end(ByteReader &r) {
    tseal::EndRecord rec;
    if (!rec.decode(r)) return false;
    flush_pass();
    clean_ = rec.clean;
    sink_.on_end(rec.end_time, rec.events, rec.clean);
    sink_.on_exit_flags(rec.flags);
    return true;
  }

  // Events of one pass all precede the next pass's (see tseal_format.h).
  void flush_pass() {
    std::sort(pending_.begin(), pending_.end(), [](const PendingEvent &a, const PendingEvent &b) {
      return a.e.time_ns != b.e.time_ns ? a.e.time_ns < b.e.time_ns : a.seq < b.seq;
    });
    for (const PendingEvent &p : pending_) sink_.on_event(p.e);
    events_ += pending_.size();
    pending_.clear();
    // One unusually large pass must not pin its memory for the rest of the file.
    if (pending_.capacity() > (1u << 16)) pending_.shrink_to_fit();
  }

  HistorySink &sink_;
  std::vector<std::string> &warnings_;
  const std::string &path_;
  std::vector<PendingEvent> pending_;
  std::vector<std::string> py_strings_;  // id -> string, for PyStacks chunks
  uint64_t seq_ = 0;
  uint64_t events_ = 0;
  bool clean_ = false;
};

}  // namespace

bool looks_like_history(const std::string &path) {
  std::unique_ptr<FILE, FileCloser> f(fopen(path.c_str(), "rb"));
  char magic[8];
  return f && fread(magic, 1, 8, f.get()) == 8 && memcmp(magic, tseal::kMagic, 8) == 0;
}

bool read_history(const std::string &path, HistorySink &sink, std::string &error,
                  std::vector<std::string> &warnings, HistoryReadStats *stats,
                  void (*progress)(uint64_t, uint64_t)) {
  std::unique_ptr<FILE, FileCloser> f(fopen(path.c_str(), "rb"));
  if (!f) {
    error = "cannot open " + path + ": " + strerror(errno);
    return false;
  }
  fseeko(f.get(), 0, SEEK_END);
  uint64_t total = static_cast<uint64_t>(ftello(f.get()));
  fseeko(f.get(), 0, SEEK_SET);

  uint8_t header[tseal::kFileHeaderSize];
  if (fread(header, 1, sizeof header, f.get()) != sizeof header ||
      memcmp(header, tseal::kMagic, sizeof tseal::kMagic) != 0) {
    error = path + " is not a torchseal history file";
    return false;
  }
  ByteReader hr(header + 8, 8);
  uint32_t version = hr.u32();
  if (version != tseal::kVersion) {
    error = path + " is a torchseal history file of version " + std::to_string(version) +
            ", which this torchseal (version " + std::to_string(tseal::kVersion) + ") cannot read";
    return false;
  }

  Reader reader(sink, warnings, path);
  uint64_t offset = sizeof header, next_progress = 8u << 20;
  uint64_t chunks = 0;
  std::vector<uint8_t> payload;
  bool truncated = false;
  std::string damage;
  for (;;) {
    uint8_t ch[tseal::kChunkHeaderSize];
    size_t got = fread(ch, 1, sizeof ch, f.get());
    if (got == 0) break;
    if (got < sizeof ch) {
      damage = "a partial chunk header";
      truncated = true;
      break;
    }
    ByteReader cr(ch, sizeof ch);
    uint8_t type = cr.u8();
    cr.u8();
    cr.u8();
    cr.u8();
    uint32_t len = cr.u32();
    uint32_t crc = cr.u32();
    if (type < static_cast<uint8_t>(Chunk::Process) || len > tseal::kMaxChunkPayload) {
      damage = "an invalid chunk header";
      truncated = true;
      break;
    }
    payload.resize(len);
    if (fread(payload.data(), 1, len, f.get()) != len) {
      damage = "a partial chunk";
      truncated = true;
      break;
    }
    if (tseal::crc32(payload.data(), len) != crc) {
      damage = "a chunk whose checksum does not match";
      truncated = true;
      break;
    }
    if (!reader.chunk(static_cast<Chunk>(type), payload.data(), len)) {
      damage = "a chunk that does not decode";
      truncated = true;
      break;
    }
    offset += sizeof ch + len;
    ++chunks;
    if (progress && offset >= next_progress) {
      progress(offset, total);
      next_progress = offset + (8u << 20);
    }
  }
  reader.finish();
  if (truncated) {
    warnings.push_back("history file " + path + " is truncated or corrupt at byte " +
                       std::to_string(offset) + " (" + damage + "); using the " +
                       std::to_string(reader.events()) + " events before it");
  } else if (!reader.clean()) {
    truncated = true;
    warnings.push_back("history file " + path +
                       " is truncated: it has no clean end (the process crashed or was killed); "
                       "using the " +
                       std::to_string(reader.events()) + " events it holds");
  }
  if (stats) {
    stats->bytes = offset;
    stats->chunks = chunks;
    stats->events = reader.events();
    stats->clean_end = reader.clean();
    stats->truncated = truncated;
  }
  return true;
}

}  // namespace torchseal
