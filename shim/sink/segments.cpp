#include "shim/sink/segments.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <set>

#include "common/format/checkpoint.h"
#include "common/format/event_codec.h"
#include "common/format/segment_files.h"
#include "common/format/tseal_format.h"
#include "common/live/checkpoint_state.h"
#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/fast_clock.h"

namespace torchseal::history::segments {

namespace {

using tseal::Chunk;

// The events of a pass, in time order, re-encoded into slices, each written
// as a pass of its own. A pass holds whatever the threads made since the
// last one, which on a busy machine is many segments' worth; slices of it
// let a segment end at any point, so segments keep their size, and each
// slice is still totally ordered against the next (the reader's one rule).
class Slice {
 public:
  void add(const Event &e);
  size_t bytes() const { return bytes_; }
  // The slice as a Pass record and one Events chunk per thread; empties it.
  void take(std::vector<uint8_t> &out);

 private:
  struct Thread {
    uint32_t tid;
    tseal::CodecState st;
    uint64_t base_time = 0, count = 0;
    std::vector<uint8_t> bytes;
  };
  std::vector<Thread> threads_;
  size_t bytes_ = 0;
  uint64_t last_ns_ = 0;
};

struct Kept {
  uint64_t seq;
  uint64_t bytes;
  uint8_t pins;
  uint64_t base;  // the base checkpoint its checkpoint applies to
};

struct State {
  bool active = false;
  std::string path;
  uint64_t limit = 0, seg_target = 0, largest = 0;
  WriteFn write_main = nullptr;
  ErrorFn on_error = nullptr;
  uint64_t main_bytes = 0;
  int fd = -1;
  uint64_t seq = 0, cur_bytes = 0, step_at_start = 0;
  uint8_t cur_pins = 0;
  bool cur_over_cap = false, warned_over_cap = false;
  std::deque<Kept> kept;  // closed segments on disk, oldest first
  // Base checkpoints on disk (seq -> bytes): the current one, and those a
  // kept segment applies to.
  std::map<uint64_t, uint64_t> bases;
  uint64_t base = 0;  // the current one
  // OOMs whose snapshot the main file has (time, thread).
  std::set<std::pair<uint64_t, uint32_t>> snapshots;
  // What the checkpoints hold, from the events written so far.
  std::unique_ptr<live::CheckpointState> ck;
  Slice slice;
  // The current segment's event count and time range, and the latest event
  // written (the writer runs behind).
  uint64_t seg_events = 0, first_ns = 0, last_ns = 0, run_last_ns = 0;
};

State &S() {
  static constinit Lazy<State> s;
  return s.get();
}

bool write_seg(const uint8_t *p, size_t n) {
  State &s = S();
  size_t off = 0;
  while (off < n) {
    ssize_t w = ::write(s.fd, p + off, n - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      s.active = false;
      s.on_error(err);
      return false;
    }
    off += static_cast<size_t>(w);
  }
  s.cur_bytes += n;
  return true;
}

void write_main(const std::vector<uint8_t> &out) {
  State &s = S();
  s.write_main(out);
  s.main_bytes += out.size();
}

bool write_file(int fd, const std::vector<uint8_t> &out) {
  for (size_t off = 0; off < out.size();) {
    ssize_t w = ::write(fd, out.data() + off, out.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

uint64_t base_bytes() {
  State &s = S();
  auto it = s.bases.find(s.base);
  return it == s.bases.end() ? 0 : it->second;
}

bool fail(int err) {
  State &s = S();
  s.active = false;
  s.on_error(err);
  return false;
}

void enforce_cap(uint64_t room);
void drop_unused_bases();

// Starts the next segment. Its checkpoint is the change since the base
// checkpoint (a file of its own, shared by the segments after it), so a
// large live set is written once, not once a segment; a new base is taken
// where the change has grown to half the base or half a segment. The OOM
// snapshots it needs go to the main file, once each.
bool open_segment() {
  State &s = S();
  uint64_t seq = s.seq + 1;
  uint64_t step = s.ck->tally().last_step();
  uint64_t time_ns = s.run_last_ns ? s.run_last_ns : now_ns();
  auto encode = [&](uint32_t flags, const tseal::CheckpointRecord &c) {
    std::vector<uint8_t> out;
    tseal::append_file_header(out, flags);
    tseal::append_checkpoint(out, c);
    return out;
  };
  std::vector<uint8_t> delta = encode(tseal::kFlagSegment, s.ck->delta(seq, time_ns, step));
  std::vector<uint8_t> base;
  // A new base when the change passes half the base, or half a segment (a
  // segment's checkpoint must leave room for its events: segments would
  // grow with it, and fewer of them fit the cap).
  uint64_t most = std::max<uint64_t>(std::min(base_bytes(), s.seg_target) / 2, 16u << 10);
  if (!s.base || delta.size() > most) {
    base = encode(tseal::kFlagBase, s.ck->whole(seq, time_ns, step));
    s.ck->rebase(seq);
    delta = encode(tseal::kFlagSegment, s.ck->delta(seq, time_ns, step));
  }
  std::vector<uint8_t> snaps;
  for (const OomRecord &o : s.ck->tally().summary().ooms)
    if (!o.sites_at_oom.empty() && s.snapshots.insert({o.time_ns, o.tid}).second)
      tseal::append_record(snaps, Chunk::OomSnapshot,
                           tseal::OomSnapshotRecord{o.time_ns, o.tid, o.sites_at_oom});

  // A checkpoint larger than half a segment would leave room for few
  // events: segments grow with it (up to half the cap).
  s.seg_target = std::max(s.seg_target, std::min(2 * delta.size(), s.limit / 2));
  enforce_cap(base.size() + snaps.size());
  // What must be on disk whatever the cap: the main file, the base, this
  // segment. When they pass the cap the history says so, once here and in
  // every index entry, and keeps them: the verdicts stay exact.
  uint64_t needed = s.main_bytes + snaps.size() + std::max(s.seg_target, s.largest) +
                    (base.empty() ? base_bytes() : base.size());
  s.cur_over_cap = needed > s.limit;
  // Then the segments are as large as the cap allows: the fewer of them, the
  // fewer checkpoints.
  if (s.cur_over_cap) s.seg_target = std::max(s.seg_target, s.limit / 2);
  if (s.cur_over_cap && !s.warned_over_cap) {
    s.warned_over_cap = true;
    log::warn(
        "the history cap (%llu bytes) cannot hold one checkpoint of the live set (%zu "
        "allocations, %llu bytes) with the main file and a segment: the history's files pass "
        "the cap; the verdicts stay exact",
        static_cast<unsigned long long>(s.limit), s.ck->live().size(),
        static_cast<unsigned long long>(base.empty() ? base_bytes() : base.size()));
  }

  if (!base.empty()) {
    std::string bp = base_path(s.path, seq);
    int fd = ::open(bp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return fail(errno);
    bool ok = write_file(fd, base);
    int err = errno;
    ::close(fd);
    if (!ok) return fail(err);
    s.bases[seq] = base.size();
    s.base = seq;
    drop_unused_bases();  // the previous base, if no segment on disk needs it
  }
  if (!snaps.empty()) write_main(snaps);

  s.seq = seq;
  std::string p = segment_path(s.path, s.seq);
  s.fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (s.fd < 0) return fail(errno);
  s.cur_bytes = 0;
  s.cur_pins = s.seq == 1 ? tseal::kPinFirst : 0;
  s.step_at_start = step;
  s.seg_events = s.first_ns = s.last_ns = 0;
  return write_seg(delta.data(), delta.size());
}

// Deletes the base checkpoints no segment on disk applies to.
void drop_unused_bases() {
  State &s = S();
  for (auto it = s.bases.begin(); it != s.bases.end();) {
    bool used =
        it->first == s.base || std::any_of(s.kept.begin(), s.kept.end(),
                                           [&](const Kept &k) { return k.base == it->first; });
    if (used) {
      ++it;
      continue;
    }
    std::string p = base_path(s.path, it->first);
    if (unlink(p.c_str()) != 0 && errno != ENOENT)
      log::warn("cannot delete history checkpoint %s: %s", p.c_str(), strerror(errno));
    it = s.bases.erase(it);
  }
}

// The segment to delete next, or none. The most recent segments, at least
// half the cap of them, stay while older ones remain (marks on every step
// pin every segment: pins must not crowd out the recent part). Of the older
// ones, the oldest without a pin goes first, then the oldest pinned one of
// the lowest rank: marks and dumps, then OOMs, then the first steps.
std::deque<Kept>::iterator victim() {
  State &s = S();
  auto recent = s.kept.end();
  for (uint64_t bytes = 0; recent != s.kept.begin() && bytes < s.limit / 2;)
    bytes += (--recent)->bytes;
  for (auto it = s.kept.begin(); it != recent; ++it)
    if (!it->pins) return it;
  // A segment goes at `rank` when it has no pin that ranks above it (the
  // lower bits: kPinFirst < kPinOom < kPinMark).
  for (uint8_t rank : {tseal::kPinMark, tseal::kPinOom, tseal::kPinFirst})
    for (auto it = s.kept.begin(); it != recent; ++it)
      if (!(it->pins & (rank - 1))) return it;
  return s.kept.empty() ? s.kept.end() : s.kept.begin();
}

// Deletes segments (and the base checkpoints only they applied to) until
// the files, `extra` bytes and a full next segment fit the cap.
void enforce_cap(uint64_t extra) {
  State &s = S();
  auto on_disk = [&] {
    uint64_t n = s.main_bytes;
    for (const Kept &k : s.kept) n += k.bytes;
    for (const auto &b : s.bases) n += b.second;
    return n;
  };
  // Room for the next segment: as large as the largest so far (a pass is
  // never split, so a fast producer's segments outgrow the target).
  uint64_t room = std::max(s.seg_target, s.largest) + extra;
  drop_unused_bases();
  while (!s.kept.empty() && on_disk() + room > s.limit) {
    auto it = victim();
    if (it == s.kept.end()) break;
    std::string p = segment_path(s.path, it->seq);
    if (unlink(p.c_str()) != 0 && errno != ENOENT)
      log::warn("cannot delete history segment %s: %s", p.c_str(), strerror(errno));
    s.kept.erase(it);
    drop_unused_bases();
  }
}

void close_segment() {
  State &s = S();
  if (s.fd < 0) return;
  ::close(s.fd);
  s.fd = -1;
  tseal::SegmentRecord r;
  r.seq = s.seq;
  r.first_ns = s.first_ns;
  r.last_ns = s.last_ns;
  r.step_at_start = s.step_at_start;
  r.step_at_end = s.ck->tally().last_step();
  r.events = s.seg_events;
  r.bytes = s.cur_bytes;
  r.pins = s.cur_pins;
  s.largest = std::max(s.largest, s.cur_bytes);
  r.limit_bytes = s.limit;
  r.segment_bytes = std::max(s.seg_target, s.largest);
  r.base = s.base;
  r.base_bytes = base_bytes();
  r.over_cap = s.cur_over_cap;
  std::vector<uint8_t> out;
  tseal::append_record(out, Chunk::Segment, r);
  write_main(out);
  s.kept.push_back({s.seq, s.cur_bytes, s.cur_pins, s.base});
}

// The pins of what this slice held (an OOM, a mark or a dump keeps its
// segment and the one before it), then a new segment when this one is full.
void after_slice() {
  State &s = S();
  uint8_t seen = s.ck->tally().take_notable();
  uint8_t notable =
      (seen & live::kSawOom ? tseal::kPinOom : 0) | (seen & live::kSawMark ? tseal::kPinMark : 0);
  if (notable) {
    s.cur_pins |= notable;
    if (!s.kept.empty() && s.kept.back().seq + 1 == s.seq) s.kept.back().pins |= notable;
  }
  if (s.cur_bytes < s.seg_target) return;
  close_segment();
  open_segment();
}

void Slice::add(const Event &e) {
  Thread *t = nullptr;
  for (Thread &x : threads_)
    if (x.tid == e.tid) t = &x;
  if (!t) {
    t = &threads_.emplace_back();
    t->tid = e.tid;
  }
  if (!t->count) {
    t->base_time = e.time_ns;
    t->st.reset(e.time_ns);
  }
  size_t at = t->bytes.size();
  t->bytes.resize(at + tseal::kMaxEventBytes);
  size_t n = tseal::encode_event(t->bytes.data() + at, t->st, e);
  t->bytes.resize(at + n);
  ++t->count;
  bytes_ += n;
  last_ns_ = e.time_ns;
}

void Slice::take(std::vector<uint8_t> &out) {
  out.reserve(bytes_ + 64 * threads_.size() + 32);
  tseal::append_record(out, Chunk::Pass, tseal::PassRecord{last_ns_});
  for (Thread &t : threads_) {
    if (t.count)
      tseal::append_events_chunk(out, {t.tid, t.base_time, t.count}, t.bytes.data(),
                                 t.bytes.size());
  }
  threads_.clear();
  bytes_ = 0;
}

// Writes the slice so far as one pass.
void flush_slice() {
  State &s = S();
  if (!s.slice.bytes() || !s.active) return;
  std::vector<uint8_t> out;
  s.slice.take(out);
  if (write_seg(out.data(), out.size())) after_slice();
}

// A pass's sealed buffers, decoded once into events in time order: each
// buffer is one thread's, in time order, and a stable sort keeps buffer
// order among equal times (as a reader orders a pass).
std::vector<Event> ordered_events(const std::vector<buffers::Sealed> &chunks) {
  std::vector<Event> out;
  size_t n = 0;
  for (const buffers::Sealed &c : chunks) n += c.count;
  out.reserve(n);
  for (const buffers::Sealed &c : chunks) {
    tseal::ByteReader r(c.bytes.data(), c.bytes.size());
    tseal::CodecState st;
    st.reset(c.base_time);
    Event e;
    while (tseal::decode_event(r, st, e)) {
      e.tid = c.tid;
      out.push_back(e);
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Event &a, const Event &b) { return a.time_ns < b.time_ns; });
  return out;
}

}  // namespace

void begin(const std::string &path, uint64_t limit, uint64_t main_bytes, double clock_base,
           WriteFn write_main_fn, ErrorFn on_error) {
  State &s = S();
  s.path = path;
  s.limit = limit;
  // 16 segments in the cap: dropping one frees a sixteenth, and a window
  // opens a few. Never so small that a checkpoint would fill them.
  s.seg_target = std::clamp<uint64_t>(limit / 16, 64u << 10, 64u << 20);
  s.write_main = write_main_fn;
  s.on_error = on_error;
  s.main_bytes = main_bytes;
  s.ck = std::make_unique<live::CheckpointState>();
  s.ck->set_clock_base(clock_base);
  s.active = true;
  open_segment();
}

bool active() { return S().active; }

void write_pass(const std::vector<uint8_t> &meta, const tseal::LabelsRecord &labels,
                const std::vector<buffers::Sealed> &chunks) {
  State &s = S();
  if (!s.active) return;
  if (!meta.empty()) write_main(meta);
  for (const auto &[id, label] : labels.labels) s.ck->on_label(id, label);
  if (chunks.empty()) return;
  for (const Event &e : ordered_events(chunks)) {
    s.ck->apply(e);
    if (!s.seg_events++) s.first_ns = e.time_ns;
    s.last_ns = s.run_last_ns = e.time_ns;
    s.slice.add(e);
    // Eight slices a segment: a segment ends within an eighth of its size.
    if (s.slice.bytes() >= std::max<uint64_t>(s.seg_target / 8, 4096)) {
      flush_slice();
      if (!s.active) return;
    }
  }
  flush_slice();
}

void finish() {
  State &s = S();
  if (!s.active) return;
  close_segment();
  s.active = false;
}

void reset_after_fork() {
  State &s = S();
  if (s.fd >= 0) ::close(s.fd);
  // The parent's state may have been mid-update at the fork: abandon it
  // (its memory is never freed: a half-updated table cannot be).
  s.ck.release();
  new (&s) State();
}

}  // namespace torchseal::history::segments
