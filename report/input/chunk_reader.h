// One file's chunks to a HistoryListener: the decoding and the per-pass ordering
// every history read shares (a single file, and a segmented history's main
// and segment files).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/format/checkpoint.h"
#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "report/input/history_reader.h"

namespace torchseal {

class ChunkReader {
 public:
  explicit ChunkReader(HistoryListener &listener) : listener_(listener) {}

  // False when the payload does not decode.
  bool chunk(tseal::Chunk type, const uint8_t *p, size_t n);
  // One thread's encoded events (an Events chunk's header fields and the
  // bytes after them), for a writer that holds them unframed.
  bool events(uint32_t tid, uint64_t base_time, uint64_t count, const uint8_t *p, size_t n);
  // Ends the current pass (end of a file, or before anything that follows
  // every event).
  void flush_pass();

  uint64_t events() const { return events_; }
  bool clean() const { return clean_; }

  // Segmented histories. The main file's End and Verdict follow the events
  // of the segment files: held until release_held().
  void set_hold_end(bool hold) { hold_end_ = hold; }
  void release_held();
  // Segment index entries read so far.
  const std::vector<tseal::SegmentRecord> &segments() const { return segments_; }
  // Checkpoints: delivered (whole or not) or skipped, set per file.
  enum class Checkpoints { Skip, Whole, Window };
  void set_checkpoints(Checkpoints c) { checkpoints_ = c; }
  // Loads base checkpoint `seq` whole (a delta checkpoint is applied to it).
  using BaseLoader = std::function<bool(uint64_t seq, tseal::CheckpointRecord &out)>;
  void set_base_loader(BaseLoader f) { base_loader_ = std::move(f); }
  // Why the last checkpoint could not be delivered (empty: it was).
  const std::string &checkpoint_error() const { return checkpoint_error_; }
  const ProcessInfo &process() const { return process_; }
  double clock_base() const { return clock_base_; }

 private:
  bool deliver_checkpoint();

  HistoryListener &listener_;
  std::vector<Event> pending_;           // this pass's, in file order
  std::vector<size_t> runs_;             // where each Events chunk's events begin in pending_
  std::vector<std::string> py_strings_;  // id -> string, for PyStacks chunks
  uint64_t events_ = 0;
  bool clean_ = false;
  ProcessInfo process_;
  double clock_base_ = 0;

  bool hold_end_ = false;
  std::optional<tseal::EndRecord> end_;
  std::optional<tseal::VerdictRecord> verdict_;
  std::vector<tseal::SegmentRecord> segments_;
  Checkpoints checkpoints_ = Checkpoints::Skip;
  tseal::CheckpointReader checkpoint_;
  BaseLoader base_loader_;
  std::string checkpoint_error_;
  // The main file's OOM snapshots, by tseal::oom_key.
  std::unordered_multimap<uint64_t, tseal::OomSnapshotRecord> snapshots_;
};

// Reads one file's chunks (after its header) into `reader`. Returns false
// and sets `damage` at the first damaged chunk; `offset` is where reading
// stopped. `progress(bytes)` is called every few MB.
struct ChunkFileResult {
  uint64_t offset = 0;
  uint64_t chunks = 0;
  std::string damage;  // empty: read to its end
};
ChunkFileResult read_chunk_file(FILE *f, ChunkReader &reader,
                                const std::function<void(uint64_t)> &progress = {});

// Opens a history file and checks its header; `flags` gets its flags.
// nullptr with a one-line `error` when it is not a readable history.
FILE *open_history_file(const std::string &path, uint32_t &flags, std::string &error);

// The warning for a history without an End chunk: one wording for both kinds.
std::string no_clean_end(const std::string &path, uint64_t events);

}  // namespace torchseal
