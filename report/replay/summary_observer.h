// The replay's accumulation of a run (RunSummary), for the analysis replay
// and any reader that needs the lists: the rules are RunTally's
// (common/live/run_tally.h), which the shim's capped-history writer keeps
// too, so the checkpoint a segment starts with is what a reader has there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/live/run_tally.h"
#include "common/model/run_summary.h"
#include "report/replay/replay.h"

namespace torchseal {

class SummaryObserver : public ReplayObserver {
 public:
  void on_process(const ProcessInfo &, double clock_base) override {
    tally_.set_clock_base(clock_base);
  }
  void on_label(uint32_t id, std::string &&label) override { tally_.on_label(id, label); }
  void on_event(const Event &e) override { tally_.on_event(e, replay_->live()); }
  uint64_t on_alloc(const Event &e) override {
    tally_.on_alloc(e, replay_->live());
    return 0;
  }
  void on_teardown(const Event &, const std::vector<const ReplayRecord *> &dying) override {
    tally_.on_teardown(dying);
  }
  void on_checkpoint(RunSummary &&summary, bool whole) override {
    tally_.restart(std::move(summary), whole, replay_->live());
  }

  const RunSummary &summary() const { return tally_.summary(); }
  double clock_base() const { return tally_.clock_base(); }
  uint64_t last_step() const { return tally_.last_step(); }
  uint64_t ooms_pushed() const { return tally_.ooms_pushed(); }
  uint64_t halvings(bool windows) const { return tally_.halvings(windows); }

 protected:
  live::RunTally tally_;
  RunSummary &sum_ = tally_.summary();
};

}  // namespace torchseal
