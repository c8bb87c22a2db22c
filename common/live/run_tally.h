// What each event adds to a run's lists (RunSummary: step samples per site,
// OOMs with their live set, marks, invalid frees, teardown leaks, the peak),
// with the recorder's rules (live_rules.h, run_summary.h's bounds). It reads
// the live state from a LiveSet it is fed alongside. The replay's summary
// observer (report/replay) and the shim's capped-history writer (shim/sink)
// both keep one, so a checkpoint holds what a reader would have there.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/live/live_set.h"
#include "common/model/run_summary.h"

namespace torchseal::live {

// What an event was that a capped history keeps full detail around.
enum Notable : uint8_t { kSawOom = 1, kSawMark = 2 };

class RunTally {
 public:
  void set_clock_base(double clock_base) { clock_base_ = clock_base; }
  double clock_base() const { return clock_base_; }
  // A Mark event's label (its `size` is the id).
  void on_label(uint32_t id, const std::string &label) { labels_[id] = label; }
  std::string label(uint64_t id) const;

  // Every event, before `live` applies it.
  void on_event(const Event &e, const LiveSet &live);
  // An allocation, before `live` holds it (the peak counts it).
  void on_alloc(const Event &e, const LiveSet &live);
  // What a teardown ends: leaks, detected at the teardown.
  void on_teardown(const std::vector<const LiveEntry *> &dying);
  // Starts from a checkpoint's summary (whole), or afresh with only the live
  // state of `live` (a window: its lists are its own).
  void restart(RunSummary &&summary, bool whole, const LiveSet &live);

  const RunSummary &summary() const { return sum_; }
  RunSummary &summary() { return sum_; }
  // The Notable bits of what was seen since the last call.
  uint8_t take_notable() {
    uint8_t n = notable_;
    notable_ = 0;
    return n;
  }
  // Step number of the latest Step event, a time window's too (0 before the first).
  uint64_t last_step() const { return last_step_; }
  // How the lists have grown (a checkpoint stores the growth since a base):
  // OOMs pushed, and halvings of the step and the window samples.
  uint64_t ooms_pushed() const { return ooms_pushed_; }
  uint64_t halvings(bool windows) const { return halvings_[windows]; }

 private:
  void oom(const Event &e, const LiveSet &live);
  void step(const Event &e, const LiveSet &live);

  RunSummary sum_;
  double clock_base_ = 0;
  std::unordered_map<uint32_t, std::string> labels_;
  uint8_t notable_ = 0;
  uint64_t last_step_ = 0;
  uint64_t ooms_pushed_ = 0, halvings_[2] = {0, 0};
};

}  // namespace torchseal::live
