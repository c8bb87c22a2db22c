// Streaming parser for .tseal history files: chunks in, decoded tables and
// time-ordered events out to a listener (live state is report/replay/'s job).
// Memory is bounded by one writer pass plus whatever the listener keeps, never
// by the file size. A truncated or corrupt tail ends the read with a warning
// containing "truncated"; everything before it is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/format/checkpoint.h"
#include "common/format/records.h"
#include "common/model/analysis_input.h"
#include "common/model/event.h"
#include "common/model/history_window.h"
#include "report/model/report_model.h"

namespace torchseal {

class HistoryListener {
 public:
  virtual ~HistoryListener() = default;
  // clock_base: unix seconds at CLOCK_MONOTONIC zero, to date event times.
  virtual void on_process(const ProcessInfo &, double /*clock_base*/) {}
  virtual void on_modules(const std::vector<Module> &) {}
  virtual void on_stack(StackId, std::vector<uint64_t> &&) {}
  virtual void on_pystack(PyStackId, std::vector<PyFrame> &&) {}
  virtual void on_symbol(uint64_t /*ip*/, std::vector<NativeFrame> &&) {}
  // A mark label (Mark events carry its id in `size`).
  virtual void on_label(uint32_t /*id*/, std::string && /*label*/) {}
  // Events arrive in time order across all threads.
  virtual void on_event(const Event &) {}
  virtual void on_end(double /*end_time*/, uint64_t /*events*/, bool /*clean*/) {}
  // Exit-time facts from the End chunk (bit 0: PyTorch caching allocator,
  // bit 1: PyTorch process).
  virtual void on_exit_flags(uint8_t /*flags*/) {}
  // The exit report's verdict (Verdict chunk: holder scan, site holders,
  // OOM verdicts); after every event it refers to.
  virtual void on_verdict(tseal::VerdictRecord && /*verdict*/) {}
  // A segment's checkpoint (segmented histories): the replay state where the
  // events that follow begin. `whole`: the read starts here and the summary
  // stands for every event before it; else only the live state matters (a
  // window that starts in this segment).
  virtual void on_checkpoint(tseal::CheckpointRecord && /*c*/, bool /*whole*/) {}
  // True once the listener wants no more events (a window has ended): the reader
  // opens no further segment.
  virtual bool done() const { return false; }
  // Every chunk has been delivered.
  virtual void on_read_done() {}
};

// Parses "--steps A..B" ("A..", "..B" too); false with a one-line error.
bool parse_step_range(const std::string &text, HistoryWindow &w, std::string &error);

struct HistoryReadStats {
  uint64_t bytes = 0;  // bytes read (every file)
  uint64_t chunks = 0;
  uint64_t events = 0;
  bool clean_end = false;
  bool truncated = false;
  // Segmented histories (0 for a single file): segments the index lists
  // (written), still on disk, and read for this request; the writer's
  // target segment size and cap.
  uint64_t segments = 0, segments_on_disk = 0, segments_read = 0;
  uint64_t segment_bytes = 0, limit_bytes = 0;
  uint64_t checkpoint_bytes = 0;  // the last indexed segment's base checkpoint
  bool over_cap = false;          // a segment's checkpoint alone passed the cap
};

// Returns false with a one-line `error` when the file is unusable (not ours,
// unknown version, unreadable). Damage after a valid header is a warning.
// `progress(done_bytes, total_bytes)`, if set, is called every few MB.
// A window makes a segmented history open only the segments that overlap it
// (the listener applies the window itself: report/replay/replay.h).
bool read_history(const std::string &path, HistoryListener &listener, std::string &error,
                  std::vector<std::string> &warnings, HistoryReadStats *stats = nullptr,
                  void (*progress)(uint64_t, uint64_t) = nullptr,
                  const HistoryWindow *window = nullptr);

// True if the file starts with the .tseal magic (cheap sniff for the CLI).
bool looks_like_history(const std::string &path);

}  // namespace torchseal
