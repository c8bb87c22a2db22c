// A capped history: the main file (metadata, the segment index, end and
// verdict), then the segment files the request needs, each opened through
// the index. A whole-run read starts at the checkpoint of the oldest segment
// of the unbroken run of segments that ends the history (the drops are all
// before it), so it ends with what an uncapped read ends with; a window
// starts at the checkpoint of the segment it begins in.
#include "report/input/segmented_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <map>
#include <memory>

#include "common/format/segment_files.h"
#include "report/input/chunk_reader.h"

namespace torchseal {

namespace {

// A base checkpoint file, whole (a delta checkpoint is applied to it).
class BaseCapture : public HistoryListener {
 public:
  void on_checkpoint(tseal::CheckpointRecord &&c, bool) override {
    rec = std::move(c);
    got = true;
  }
  tseal::CheckpointRecord rec;
  bool got = false;
};

bool load_base(const std::string &path, uint64_t seq, tseal::CheckpointRecord &out,
               uint64_t &bytes_read) {
  uint32_t flags = 0;
  std::string err;
  std::string bp = base_path(path, seq);
  std::unique_ptr<FILE, int (*)(FILE *)> f(open_history_file(bp, flags, err), fclose);
  if (!f || flags != tseal::kFlagBase) return false;
  BaseCapture cap;
  ChunkReader reader(cap);
  reader.set_checkpoints(ChunkReader::Checkpoints::Whole);
  ChunkFileResult res = read_chunk_file(f.get(), reader);
  bytes_read += res.offset;
  if (!res.damage.empty() || !cap.got || cap.rec.base || cap.rec.seq != seq) return false;
  out = std::move(cap.rec);
  return true;
}

struct Seg {
  uint64_t seq = 0;
  bool indexed = false;  // closed: its index entry was written
  tseal::SegmentRecord rec;
  bool on_disk = false;
  uint64_t size = 0;
};

bool file_size(const std::string &p, uint64_t &size) {
  struct stat st;
  if (stat(p.c_str(), &st) != 0) return false;
  size = static_cast<uint64_t>(st.st_size);
  return true;
}

// Whether segment `s` can hold part of the window (an unindexed segment, the
// one being written at a crash, may hold anything after the indexed ones).
bool overlaps(const Seg &s, const HistoryWindow &w, uint64_t from_ns, uint64_t to_ns) {
  if (!s.indexed) return true;
  if (w.by_time) return s.rec.last_ns >= from_ns && s.rec.first_ns <= to_ns;
  // Steps A..B begin after step A-1 ended and end when step B does.
  bool after_start = !w.from_step || s.rec.step_at_end + 1 >= w.from_step;
  bool before_end = !w.to_step || s.rec.step_at_start < w.to_step;
  return after_start && before_end;
}

}  // namespace

bool read_segmented(const std::string &path, FILE *main, HistoryListener &listener,
                    std::string &error, std::vector<std::string> &warnings, HistoryReadStats *stats,
                    void (*progress)(uint64_t, uint64_t), const HistoryWindow *window) {
  (void)error;
  ChunkReader reader(listener);
  reader.set_hold_end(true);
  uint64_t bytes_read = 0;
  reader.set_base_loader([&](uint64_t seq, tseal::CheckpointRecord &out) {
    return load_base(path, seq, out, bytes_read);
  });
  ChunkFileResult mres = read_chunk_file(main, reader);
  if (!mres.damage.empty())
    warnings.push_back("history file " + path + " is truncated or corrupt at byte " +
                       std::to_string(mres.offset) + " (" + mres.damage +
                       "); its segment index ends there");
  bytes_read += mres.offset;

  // The index, then any segment written after its last entry (the one open
  // when the process died).
  std::map<uint64_t, Seg> segs;
  uint64_t limit = 0, seg_bytes = 0, checkpoint_bytes = 0;
  bool over_cap = false;
  for (const tseal::SegmentRecord &r : reader.segments()) {
    Seg &s = segs[r.seq];
    s.seq = r.seq;
    s.indexed = true;
    s.rec = r;
    limit = r.limit_bytes;
    seg_bytes = r.segment_bytes;
    checkpoint_bytes = r.base_bytes;
    over_cap |= r.over_cap != 0;
  }
  if (over_cap)
    warnings.push_back("history " + path + ": its cap of " + std::to_string(limit) +
                       " bytes could not hold one checkpoint of the live set (" +
                       std::to_string(checkpoint_bytes) +
                       " bytes) with the main file and a segment: the files passed the cap");
  uint64_t next = segs.empty() ? 1 : segs.rbegin()->first + 1;
  for (;; ++next) {
    uint64_t size;
    if (!file_size(segment_path(path, next), size)) break;
    Seg &s = segs[next];
    s.seq = next;
  }
  uint64_t on_disk = 0;
  for (auto &[seq, s] : segs) {
    s.on_disk = file_size(segment_path(path, seq), s.size);
    on_disk += s.on_disk;
  }

  // Which segments to read, oldest first.
  std::vector<const Seg *> plan;
  HistoryWindow w = window ? *window : HistoryWindow{};
  if (!w.any()) {
    // The unbroken run of segments on disk that ends the history. The
    // writer never deletes its last segment: when it is gone, the run that
    // ends before it still holds the run up to there.
    auto it = segs.rbegin();
    while (it != segs.rend() && !it->second.on_disk) ++it;
    if (it != segs.rbegin() && it != segs.rend())
      warnings.push_back("history segment " + segment_path(path, std::prev(it)->first) +
                         " is missing: the report ends with segment " + std::to_string(it->first));
    for (; it != segs.rend() && it->second.on_disk; ++it) plan.insert(plan.begin(), &it->second);
  } else {
    double start_ns = (reader.process().start_time - reader.clock_base()) * 1e9;
    double f = start_ns + w.from_s * 1e9, t = start_ns + w.to_s * 1e9;
    uint64_t from_ns = w.by_time && f > 0 ? static_cast<uint64_t>(f) : 0;
    uint64_t to_ns = !w.by_time || w.to_s < 0 ? UINT64_MAX : t > 0 ? static_cast<uint64_t>(t) : 0;
    for (auto &[seq, s] : segs) {
      if (!overlaps(s, w, from_ns, to_ns)) {
        if (!plan.empty()) break;
        continue;
      }
      if (!s.on_disk) {
        if (plan.empty()) continue;  // the window begins in dropped detail: start after it
        warnings.push_back("the window reaches segment " + std::to_string(seq) +
                           ", whose detail the history cap dropped: it ends there");
        break;
      }
      plan.push_back(&s);
    }
    if (plan.empty()) {
      for (auto &[seq, s] : segs)
        if (!s.on_disk && overlaps(s, w, from_ns, to_ns)) {
          warnings.push_back(
              "the window lies in segments whose detail the history cap dropped "
              "(from segment " +
              std::to_string(seq) + "): the report has none of its events");
          break;
        }
    } else if (segs.begin()->second.seq != plan.front()->seq) {
      auto prev = segs.find(plan.front()->seq - 1);
      if (prev != segs.end() && !prev->second.on_disk && overlaps(prev->second, w, from_ns, to_ns))
        warnings.push_back(
            "the window begins in segments whose detail the history cap dropped: "
            "it starts at segment " +
            std::to_string(plan.front()->seq));
    }
  }

  uint64_t total = 0, done = 0;
  for (const Seg *s : plan) total += s->size;
  bool truncated = false, fresh = true;
  uint64_t read = 0;
  for (size_t i = 0; i < plan.size() && !listener.done(); ++i) {
    const Seg *s = plan[i];
    std::string sp = segment_path(path, s->seq);
    // A whole-run read resumes at the next segment's checkpoint, which holds
    // everything up to it; a window ends at the damage.
    bool resume = i + 1 < plan.size() && !w.any();
    uint32_t flags = 0;
    std::string err;
    std::unique_ptr<FILE, int (*)(FILE *)> f(open_history_file(sp, flags, err), fclose);
    if (!f || !(flags & tseal::kFlagSegment)) {
      warnings.push_back((f ? sp + " is not a segment of a capped history" : err) +
                         (resume ? "; the next segment's checkpoint takes over" : ""));
      truncated = true;
      if (!resume) break;
      fresh = true;
      continue;
    }
    // Only the first segment read starts from its checkpoint (and one after
    // damage); the others continue from the events before them.
    if (fresh)
      reader.set_checkpoints(w.any() ? ChunkReader::Checkpoints::Window
                                     : ChunkReader::Checkpoints::Whole);
    fresh = false;
    ChunkFileResult res = read_chunk_file(f.get(), reader, [&](uint64_t at) {
      if (progress) progress(done + at, total);
    });
    ++read;
    bytes_read += res.offset;
    done += s->size;
    if (!res.damage.empty()) {
      truncated = true;
      if (!reader.checkpoint_error().empty()) res.damage = reader.checkpoint_error();
      warnings.push_back(
          "history segment " + sp + " is truncated or corrupt at byte " +
          std::to_string(res.offset) + " (" + res.damage + ")" +
          (resume ? "; the next segment's checkpoint takes over" : "; using the events before it"));
      if (!resume) break;
      fresh = true;
    }
  }
  reader.release_held();
  listener.on_read_done();
  if (!reader.clean()) {
    truncated = true;
    warnings.push_back(no_clean_end(path, reader.events()));
  }
  if (stats) {
    stats->bytes = bytes_read;
    stats->events = reader.events();
    stats->clean_end = reader.clean();
    stats->truncated = truncated;
    stats->segments = segs.size();
    stats->segments_on_disk = on_disk;
    stats->segments_read = read;
    stats->segment_bytes = seg_bytes;
    stats->limit_bytes = limit;
    stats->checkpoint_bytes = checkpoint_bytes;
    stats->over_cap = over_cap;
  }
  return true;
}

}  // namespace torchseal
