// Streaming parser for .tseal history files: chunks in, decoded tables and
// time-ordered events out to a sink (live state is report/replay/'s job).
// Memory is bounded by one writer pass plus whatever the sink keeps, never
// by the file size. A truncated or corrupt tail ends the read with a warning
// containing "truncated"; everything before it is used.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/format/records.h"
#include "report/model/analysis_input.h"
#include "report/model/event.h"
#include "report/model/report_model.h"

namespace torchseal {

class HistorySink {
 public:
  virtual ~HistorySink() = default;
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
};

struct HistoryReadStats {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  uint64_t events = 0;
  bool clean_end = false;
  bool truncated = false;
};

// Returns false with a one-line `error` when the file is unusable (not ours,
// unknown version, unreadable). Damage after a valid header is a warning.
// `progress(done_bytes, total_bytes)`, if set, is called every few MB.
bool read_history(const std::string &path, HistorySink &sink, std::string &error,
                  std::vector<std::string> &warnings, HistoryReadStats *stats = nullptr,
                  void (*progress)(uint64_t, uint64_t) = nullptr);

// True if the file starts with the .tseal magic (cheap sniff for the CLI).
bool looks_like_history(const std::string &path);

}  // namespace torchseal
