// The replay's accumulation of a run: what each event adds to the lists the
// analysis reads (RunSummary), with the same rules as the shim's recorder
// (shim/core/recorder.cpp). The analysis replay builds its input on it, and
// the shim's capped history writer runs it over its own output, so the
// checkpoint a segment starts with is what a reader would have had there.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model/run_summary.h"
#include "report/replay/replay.h"

namespace torchseal {

class SummaryObserver : public ReplayObserver {
 public:
  void on_process(const ProcessInfo &, double clock_base) override { clock_base_ = clock_base; }
  void on_event(const Event &e) override;
  uint64_t on_alloc(const Event &e) override;
  void on_teardown(const Event &, const std::vector<const ReplayRecord *> &dying) override;
  void on_checkpoint(RunSummary &&summary, bool whole) override;

  const RunSummary &summary() const { return sum_; }
  double clock_base() const { return clock_base_; }
  // The tseal::kPinOom / kPinMark bits of what was seen since the last call
  // (the capped writer keeps full detail around OOMs, marks and dumps).
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

 protected:
  RunSummary sum_;
  double clock_base_ = 0;

 private:
  void oom(const Event &e);
  void step(const Event &e);

  uint8_t notable_ = 0;
  uint64_t last_step_ = 0;
  uint64_t ooms_pushed_ = 0, halvings_[2] = {0, 0};
};

}  // namespace torchseal
