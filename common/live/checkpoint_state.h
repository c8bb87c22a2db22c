// What a capped history's checkpoints are made of (shim/sink/segments.cpp
// writes them): the live state (LiveSet) and the run's summary (RunTally),
// kept from the events as the writer sees them, and what changed since the
// last base checkpoint, so a segment's checkpoint is that change, not the
// whole live set again (docs/tseal-format.md, "Segmented histories").
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/format/checkpoint.h"
#include "common/live/live_set.h"
#include "common/live/run_tally.h"

namespace torchseal::live {

class CheckpointState : private LiveSet::Listener {
 public:
  void set_clock_base(double clock_base) { tally_.set_clock_base(clock_base); }
  void on_label(uint32_t id, const std::string &label) { tally_.on_label(id, label); }
  // One event, in the history's order.
  void apply(const Event &e) {
    tally_.on_event(e, live_);
    live_.apply(e, this);
  }

  const LiveSet &live() const { return live_; }
  const RunTally &tally() const { return tally_; }
  RunTally &tally() { return tally_; }

  // The whole state now, as base checkpoint `seq` (its OOM snapshots
  // included: the writer puts them in the main file).
  tseal::CheckpointRecord whole(uint64_t seq, uint64_t time_ns, uint64_t step) const;
  // Makes the state now the base the next deltas are from.
  void rebase(uint64_t seq);
  // The checkpoint `seq`, as the change since the base.
  tseal::CheckpointRecord delta(uint64_t seq, uint64_t time_ns, uint64_t step) const;

 private:
  uint64_t on_alloc(const Event &e) override;
  void on_release(const Event &, const LiveEntry &r) override { released(r.alloc); }
  void on_teardown(const Event &e, const std::vector<const LiveEntry *> &dying) override;
  void released(const Event &a);

  LiveSet live_;
  RunTally tally_;
  // The summary's sizes at the base.
  struct Base {
    uint64_t seq = 0;
    size_t invalid = 0, marks = 0, teardown = 0;
    uint64_t ooms_pushed = 0;
    size_t samples[2] = {0, 0};
    uint64_t halvings[2] = {0, 0};
  } base_;
  // Since the base, by table (pointers, VMM handles) and address: the
  // allocations made and still live, and the base's that are not.
  std::unordered_map<uint64_t, Event> added_[2];
  std::unordered_set<uint64_t> freed_[2];
};

}  // namespace torchseal::live
