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
#include <vector>

#include "report/format/tseal_format.h"
#include "report/model/event.h"
#include "report/model/run_summary.h"

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

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

struct CheckpointRecord {
  uint64_t seq = 0;
  uint64_t time_ns = 0;  // when the segment began
  uint64_t step = 0;     // the last step number before it
  std::vector<Event> live;
  std::vector<VmmMap> maps;
  std::vector<uint64_t> released;  // VMM handles released while mapped
  RunSummary summary;
};

// Appends the checkpoint's chunks.
void append_checkpoint(std::vector<uint8_t> &out, const CheckpointRecord &c);

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
