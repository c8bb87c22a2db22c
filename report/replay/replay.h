// The one replay of a history's event stream. It keeps the live state with
// the recorder's rules (LiveSet, common/live/live_set.h) and adds what a
// reader needs around it: a window of the run, checkpoints, mark labels.
// Consumers (the analysis input, Perfetto, the HTML timeline, memory_viz)
// observe the changes instead of each keeping its own tables.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/live/live_set.h"
#include "common/model/event.h"
#include "common/model/run_summary.h"
#include "report/input/history_reader.h"

namespace torchseal {

using ReplayRecord = LiveEntry;

class Replay;

// Metadata callbacks (HistoryListener's) reach the observer unchanged; the live
// state's changes come as LiveSet::Listener's (on_alloc, on_release,
// on_teardown).
class ReplayObserver : public HistoryListener, public LiveSet::Listener {
 public:
  // Only events this returns true for are replayed (e.g. up to a time).
  virtual bool wants(const Event &) { return true; }
  // Every replayed event, before the live state changes.
  void on_event(const Event &) override {}
  // An allocation that was live before the events this observer sees (a
  // checkpoint, or the start of a window); the returned tag is kept.
  virtual uint64_t on_restore(const Event &e) { return on_alloc(e); }
  // After the restores: `summary` is the run so far when the replay starts
  // from a checkpoint (whole), else empty (a window starts afresh).
  virtual void on_checkpoint(RunSummary && /*summary*/, bool /*whole*/) {}

 protected:
  friend class Replay;
  const Replay *replay_ = nullptr;  // the replay feeding this observer, for its live state
};

class Replay final : public HistoryListener {
 public:
  explicit Replay(ReplayObserver &obs) : obs_(obs) { obs.replay_ = this; }
  ~Replay() override { obs_.replay_ = nullptr; }

  void on_process(const ProcessInfo &p, double clock_base) override;
  void on_modules(const std::vector<Module> &m) override { obs_.on_modules(m); }
  void on_stack(StackId id, std::vector<uint64_t> &&ips) override {
    obs_.on_stack(id, std::move(ips));
  }
  void on_pystack(PyStackId id, std::vector<PyFrame> &&f) override {
    obs_.on_pystack(id, std::move(f));
  }
  void on_symbol(uint64_t ip, std::vector<NativeFrame> &&f) override {
    obs_.on_symbol(ip, std::move(f));
  }
  void on_label(uint32_t id, std::string &&label) override;
  void on_end(double t, uint64_t n, bool clean) override { obs_.on_end(t, n, clean); }
  void on_exit_flags(uint8_t flags) override { obs_.on_exit_flags(flags); }
  void on_verdict(tseal::VerdictRecord &&v) override { obs_.on_verdict(std::move(v)); }
  void on_event(const Event &e) override;
  void on_checkpoint(tseal::CheckpointRecord &&c, bool whole) override;
  bool done() const override { return closed_; }
  void on_read_done() override;

  // Replays only a window of the run: events before it change the live
  // state without reaching the observer, which then sees what is live at its
  // start as restored (on_restore), and events after it are dropped.
  // Before the read: a time window is placed when the Process chunk says
  // when the process started.
  void set_window(const HistoryWindow &w);
  bool windowed() const { return window_.any(); }
  const HistoryWindow &window() const { return window_; }
  // The window's bounds as replayed (CLOCK_MONOTONIC ns; 0 if it never opened).
  uint64_t window_open_ns() const { return open_ns_; }
  uint64_t window_close_ns() const { return close_ns_; }

  // Every live record, pointers first, then VMM handles (table order).
  void for_each_live(const std::function<void(const ReplayRecord &)> &fn) const {
    live_.for_each_live(fn);
  }
  uint64_t live_bytes() const { return live_.live_bytes(); }
  // The VMM mappings in force (cuMemMap minus cuMemUnmap).
  const VmmMapTable &vmm_maps() const { return live_.vmm_maps(); }
  // Every live record, for a checkpoint (the order a restore keeps).
  std::vector<Event> live_events() const { return live_.live_events(); }
  const LiveSet &live() const { return live_; }
  // The label of a Mark event (its `size`); "#id" if the file lacks it.
  std::string label(uint64_t id) const;

 private:
  void apply(const Event &e, bool notify);
  void open_window(uint64_t at_ns);

  ReplayObserver &obs_;
  LiveSet live_;
  HistoryWindow window_;
  uint64_t from_ns_ = 0, to_ns_ = UINT64_MAX;
  bool silent_ = false, closed_ = false;
  uint64_t open_ns_ = 0, close_ns_ = 0, last_ns_ = 0;
  std::unordered_map<uint32_t, std::string> labels_;
};

// Reads the history at `path` into `replay`, only `window` of it when set
// (the replay applies it; a capped history opens only its segments).
bool replay_file(const std::string &path, Replay &replay, const HistoryWindow *window,
                 std::string &error, std::vector<std::string> &warnings,
                 HistoryReadStats *stats = nullptr, void (*progress)(uint64_t, uint64_t) = nullptr);

// What a report says of the read: the segments and the window as replayed.
HistoryReadInfo read_info(const Replay &replay, const HistoryReadStats &stats,
                          const ProcessInfo &process, double clock_base);

}  // namespace torchseal
