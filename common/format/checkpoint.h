// The chunks of a capped (segmented) history that the uncapped one lacks
// (docs/tseal-format.md, "Segmented histories"):
//   - Segment: one index entry in the main file per closed segment (its time
//     and step range, size and why it is kept), so a reader opens only the
//     segments a window needs;
//   - Checkpoint: what a segment file starts with, the replay's state at that
//     point (every live allocation, the VMM mappings in force and the run's
//     summary so far), so the segment reads on its own, and dropping the
//     segments before it loses their detail but never the verdict.
// A checkpoint is one CheckpointBegin chunk and CheckpointPart chunks (a
// large live set would not fit one chunk's 64 MiB bound).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/format/tseal_format.h"
#include "common/model/event.h"
#include "common/model/run_summary.h"

namespace torchseal::tseal {

// Why a segment is kept in full detail when older ones are dropped.
inline constexpr uint8_t kPinFirst = 1;  // the run's first steps
inline constexpr uint8_t kPinOom = 2;    // an OOM, in it or in the next segment
inline constexpr uint8_t kPinMark = 4;   // a mark or a dump, in it or in the next one

struct SegmentRecord {
  uint64_t seq = 0;                    // 1-based: file P.tseal.<seq, 6 digits>
  uint64_t first_ns = 0, last_ns = 0;  // CLOCK_MONOTONIC of its first and last event
  uint64_t step_at_start = 0;          // the last step number before it (0: none)
  uint64_t step_at_end = 0;            // ... and at its end
  uint64_t events = 0;
  uint64_t bytes = 0;  // its file's size
  uint8_t pins = 0;    // kPin* bits
  // The writer's settings when it closed the segment.
  uint64_t limit_bytes = 0, segment_bytes = 0;
  // Version 2: the base checkpoint its checkpoint applies to (0: none, its
  // checkpoint is whole) and that file's size; whether the files the segment
  // needs (main file, base, the segment) passed the cap on their own.
  uint64_t base = 0, base_bytes = 0;
  uint8_t over_cap = 0;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// An allocation a checkpoint's base had live and the checkpoint does not.
struct FreedKey {
  bool vmm = false;  // the VMM handle table, else the pointer table (Replay)
  uint64_t addr = 0;
};

struct CheckpointRecord {
  uint64_t seq = 0;
  uint64_t time_ns = 0;  // when the segment began
  uint64_t step = 0;     // the last step number before it
  // 0: the record is whole. Else it is what changed since the base checkpoint
  // of that number (its own file, P.tseal.<base>.base), which it is applied to
  // (apply_to_base): `live` the allocations made since and still live, `freed`
  // the base's that are not, the summary's lists what was appended since
  // (steps and windows: the samples that survive after the base's, thinned
  // `halvings` times since), its totals whole. The maps are always whole.
  uint64_t base = 0;
  uint64_t halvings[2] = {0, 0};  // steps, windows
  std::vector<Event> live;
  std::vector<FreedKey> freed;
  std::vector<VmmMap> maps;
  std::vector<uint64_t> released;  // VMM handles released while mapped
  RunSummary summary;
};

// Appends the checkpoint's chunks. An OOM's live-set snapshot is not in them:
// it is written once, in the main file (OomSnapshotRecord), and a reader puts
// it back (attach_oom_snapshots).
void append_checkpoint(std::vector<uint8_t> &out, const CheckpointRecord &c);

// `delta` (base != 0) applied to the whole checkpoint it names; false when it
// does not fit (an allocation freed that the base does not have).
bool apply_to_base(CheckpointRecord &whole, CheckpointRecord &&delta);

// Main file, once per OOM whose snapshot a checkpoint needs: the live set
// at the OOM by site, found by the OOM's time and thread.
struct OomSnapshotRecord {
  uint64_t time_ns = 0;
  uint32_t tid = 0;
  std::vector<SiteSample> sites;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// Gives the OOMs of a whole checkpoint that keep a snapshot (keeps_snapshot)
// and lack it their snapshot from `snapshots` (keyed by oom_key).
inline uint64_t oom_key(uint64_t time_ns, uint32_t tid) { return time_ns * 31 ^ tid; }
void attach_oom_snapshots(RunSummary &s,
                          const std::unordered_multimap<uint64_t, OomSnapshotRecord> &snapshots);

// Collects a checkpoint from its chunks, in file order.
class CheckpointReader {
 public:
  // False on a malformed payload.
  bool begin(ByteReader &r);
  bool part(ByteReader &r);
  bool active() const { return active_; }
  // The whole checkpoint; the reader is inactive afterwards.
  CheckpointRecord take();

 private:
  bool active_ = false;
  CheckpointRecord rec_;
};

}  // namespace torchseal::tseal
