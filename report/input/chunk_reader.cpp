#include "report/input/chunk_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/format/event_codec.h"

namespace torchseal {

using tseal::ByteReader;
using tseal::Chunk;

bool ChunkReader::chunk(Chunk type, const uint8_t *p, size_t n) {
  ByteReader r(p, n);
  if (checkpoint_.active() && type != Chunk::CheckpointPart && !deliver_checkpoint()) return false;
  switch (type) {
    case Chunk::Process: {
      tseal::ProcessRecord rec;
      if (!rec.decode(r)) return false;
      process_ = rec.info;
      clock_base_ = rec.clock_base;
      listener_.on_process(rec.info, rec.clock_base);
      return true;
    }
    case Chunk::Modules: {
      tseal::ModulesRecord rec;
      if (!rec.decode(r)) return false;
      listener_.on_modules(rec.modules);
      return true;
    }
    case Chunk::Stacks: {
      tseal::StacksRecord rec;
      if (!rec.decode(r)) return false;
      for (auto &[id, ips] : rec.stacks) listener_.on_stack(id, std::move(ips));
      return true;
    }
    case Chunk::PyStacks: {
      // String ids refer to this chunk's strings or an earlier chunk's.
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
          frames.push_back(
              {py_strings_[f.function], py_strings_[f.file], static_cast<int>(f.line)});
        }
        listener_.on_pystack(id, std::move(frames));
      }
      return true;
    }
    case Chunk::Events: {
      tseal::EventsHeader h;
      if (!h.decode(r)) return false;
      size_t header = n - r.remaining();
      return events(h.tid, h.base_time, h.count, p + header, n - header);
    }
    case Chunk::Pass:
      flush_pass();
      return true;
    case Chunk::Symbols: {
      tseal::SymbolsRecord rec;
      if (!rec.decode(r)) return false;
      for (auto &[ip, frames] : rec.ips) listener_.on_symbol(ip, std::move(frames));
      return true;
    }
    case Chunk::End: {
      tseal::EndRecord rec;
      if (!rec.decode(r)) return false;
      clean_ = rec.clean;
      end_ = rec;
      if (!hold_end_) release_held();
      return true;
    }
    case Chunk::Labels: {
      tseal::LabelsRecord rec;
      if (!rec.decode(r)) return false;
      for (auto &[id, label] : rec.labels) listener_.on_label(id, std::move(label));
      return true;
    }
    case Chunk::Verdict: {
      // Written after the last pass: its OOMs refer to events already read.
      tseal::VerdictRecord rec;
      if (!rec.decode(r)) return false;
      verdict_ = std::move(rec);
      if (!hold_end_) release_held();
      return true;
    }
    case Chunk::Segment: {
      tseal::SegmentRecord rec;
      if (!rec.decode(r)) return false;
      segments_.push_back(rec);
      return true;
    }
    case Chunk::OomSnapshot: {
      tseal::OomSnapshotRecord rec;
      if (!rec.decode(r)) return false;
      uint64_t key = tseal::oom_key(rec.time_ns, rec.tid);
      snapshots_.emplace(key, std::move(rec));
      return true;
    }
    case Chunk::CheckpointBegin:
    case Chunk::CheckpointPart:
      if (type == Chunk::CheckpointBegin ? checkpoint_.begin(r) : checkpoint_.part(r)) return true;
      checkpoint_.take();  // part of a checkpoint is no state to start from: never delivered
      return false;
  }
  return true;  // a newer writer's chunk type: skipped (docs/tseal-format.md)
}

bool ChunkReader::events(uint32_t tid, uint64_t base_time, uint64_t count, const uint8_t *p,
                         size_t n) {
  ByteReader r(p, n);
  tseal::CodecState st;
  st.reset(base_time);
  Event e;
  uint64_t got = 0;
  runs_.push_back(pending_.size());
  while (tseal::decode_event(r, st, e)) {
    e.tid = tid;
    pending_.push_back(e);
    ++got;
  }
  return r.ok() && got == count;
}

bool ChunkReader::deliver_checkpoint() {
  checkpoint_error_.clear();
  tseal::CheckpointRecord c = checkpoint_.take();
  if (checkpoints_ == Checkpoints::Skip) return true;
  bool whole = checkpoints_ == Checkpoints::Whole;
  checkpoints_ = Checkpoints::Skip;  // the file's later segments continue from here
  if (c.base) {
    tseal::CheckpointRecord base;
    if (!base_loader_ || !base_loader_(c.base, base)) {
      checkpoint_error_ = "its base checkpoint " + std::to_string(c.base) + " cannot be read";
      return false;
    }
    if (!tseal::apply_to_base(base, std::move(c))) {
      checkpoint_error_ = "it does not fit its base checkpoint " + std::to_string(base.seq);
      return false;
    }
    c = std::move(base);
  }
  tseal::attach_oom_snapshots(c.summary, snapshots_);
  listener_.on_checkpoint(std::move(c), whole);
  return true;
}

void ChunkReader::release_held() {
  flush_pass();
  if (end_) {
    listener_.on_end(end_->end_time, end_->events, end_->clean);
    listener_.on_exit_flags(end_->flags);
    end_.reset();
  }
  if (verdict_) {
    listener_.on_verdict(std::move(*verdict_));
    verdict_.reset();
  }
}

// Events of one pass all precede the next pass's (see tseal_format.h).
// Each Events chunk is one thread's, in time order (the decoder never lets a
// time step back), so the pass is those runs merged: stable merges of
// neighbours keep file order among equal times, as sorting by (time, seq)
// would, in n log(runs) instead of n log n.
void ChunkReader::flush_pass() {
  if (checkpoint_.active()) deliver_checkpoint();
  auto by_time = [](const Event &a, const Event &b) { return a.time_ns < b.time_ns; };
  runs_.push_back(pending_.size());
  while (runs_.size() > 2) {  // boundaries: one more than runs
    std::vector<size_t> next;
    size_t i = 0;
    for (; i + 2 < runs_.size(); i += 2) {
      std::inplace_merge(pending_.begin() + static_cast<long>(runs_[i]),
                         pending_.begin() + static_cast<long>(runs_[i + 1]),
                         pending_.begin() + static_cast<long>(runs_[i + 2]), by_time);
      next.push_back(runs_[i]);
    }
    if (i + 1 < runs_.size()) next.push_back(runs_[i]);  // an odd run left as it is
    next.push_back(runs_.back());
    runs_.swap(next);
  }
  runs_.clear();
  for (const Event &e : pending_) listener_.on_event(e);
  events_ += pending_.size();
  pending_.clear();
  // One unusually large pass must not pin its memory for the rest of the file.
  if (pending_.capacity() > (1u << 20)) pending_.shrink_to_fit();
}

ChunkFileResult read_chunk_file(FILE *f, ChunkReader &reader,
                                const std::function<void(uint64_t)> &progress) {
  ChunkFileResult res;
  res.offset = tseal::kFileHeaderSize;
  uint64_t next_progress = 8u << 20;
  std::vector<uint8_t> payload;
  for (;;) {
    uint8_t ch[tseal::kChunkHeaderSize];
    size_t got = fread(ch, 1, sizeof ch, f);
    if (got == 0) break;
    if (got < sizeof ch) {
      res.damage = "a partial chunk header";
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
      res.damage = "an invalid chunk header";
      break;
    }
    payload.resize(len);
    if (fread(payload.data(), 1, len, f) != len) {
      res.damage = "a partial chunk";
      break;
    }
    if (tseal::crc32(payload.data(), len) != crc) {
      res.damage = "a chunk whose checksum does not match";
      break;
    }
    if (!reader.chunk(static_cast<Chunk>(type), payload.data(), len)) {
      res.damage = "a chunk that does not decode";
      break;
    }
    res.offset += sizeof ch + len;
    ++res.chunks;
    if (progress && res.offset >= next_progress) {
      progress(res.offset);
      next_progress = res.offset + (8u << 20);
    }
  }
  reader.flush_pass();
  return res;
}

FILE *open_history_file(const std::string &path, uint32_t &flags, std::string &error) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) {
    error = "cannot open " + path + ": " + strerror(errno);
    return nullptr;
  }
  uint8_t header[tseal::kFileHeaderSize];
  if (fread(header, 1, sizeof header, f) != sizeof header ||
      memcmp(header, tseal::kMagic, sizeof tseal::kMagic) != 0) {
    fclose(f);
    error = path + " is not a torchseal history file";
    return nullptr;
  }
  ByteReader hr(header + 8, 8);
  uint32_t version = hr.u32();
  flags = hr.u32();
  if (version < tseal::kOldestVersion || version > tseal::kVersion) {
    fclose(f);
    error = path + " is a torchseal history file of version " + std::to_string(version) +
            ", which this torchseal (version " + std::to_string(tseal::kVersion) + ") cannot read";
    return nullptr;
  }
  return f;
}

std::string no_clean_end(const std::string &path, uint64_t events) {
  return "history file " + path +
         " is truncated: it has no clean end (the process crashed or was killed); using the " +
         std::to_string(events) + " events it holds";
}

}  // namespace torchseal
