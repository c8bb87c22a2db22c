#include "common/live/checkpoint_state.h"

#include <algorithm>
#include <tuple>
#include <type_traits>

namespace torchseal::live {

uint64_t CheckpointState::on_alloc(const Event &e) {
  added_[e.family == Family::Vmm][e.addr] = e;
  tally_.on_alloc(e, live_);
  return 0;
}

void CheckpointState::on_teardown(const Event &, const std::vector<const LiveEntry *> &dying) {
  tally_.on_teardown(dying);
  for (const LiveEntry *r : dying) released(r->alloc);
}

namespace {

// What every checkpoint, whole or a change, says first: where it is taken.
tseal::CheckpointRecord record_at(uint64_t seq, uint64_t time_ns, uint64_t step) {
  tseal::CheckpointRecord c;
  c.seq = seq;
  c.time_ns = time_ns;
  c.step = step;
  return c;
}

}  // namespace

// An allocation made since the base leaves the change; one of the base's
// becomes a freed key (an address reused since is both).
void CheckpointState::released(const Event &a) {
  bool vmm = a.family == Family::Vmm;
  if (!added_[vmm].erase(a.addr)) freed_[vmm].insert(a.addr);
}

tseal::CheckpointRecord CheckpointState::whole(uint64_t seq, uint64_t time_ns,
                                               uint64_t step) const {
  tseal::CheckpointRecord c = record_at(seq, time_ns, step);
  c.live = live_.live_events();
  // In the order they were made: neighbours' times and addresses are close,
  // which the checkpoint's encoding turns into few bytes.
  std::sort(c.live.begin(), c.live.end(),
            [](const Event &a, const Event &b) { return a.time_ns < b.time_ns; });
  c.maps = live_.vmm_maps().list();
  c.released = live_.vmm_maps().released();
  c.summary = tally_.summary();
  return c;
}

void CheckpointState::rebase(uint64_t seq) {
  const RunSummary &sum = tally_.summary();
  base_ = Base{seq,
               sum.invalid_frees.size(),
               sum.marks.size(),
               sum.teardown.size(),
               tally_.ooms_pushed(),
               {sum.steps.size(), sum.windows.size()},
               {tally_.halvings(false), tally_.halvings(true)}};
  for (int k = 0; k < 2; ++k) {
    added_[k].clear();
    freed_[k].clear();
  }
}

tseal::CheckpointRecord CheckpointState::delta(uint64_t seq, uint64_t time_ns,
                                               uint64_t step) const {
  tseal::CheckpointRecord c = record_at(seq, time_ns, step);
  c.base = base_.seq;
  for (int k = 0; k < 2; ++k) {
    for (const auto &kv : added_[k]) c.live.push_back(kv.second);
    for (uint64_t addr : freed_[k]) c.freed.push_back({k == 1, addr});
  }
  // In the order they were made (the hash tables' order is no order).
  std::sort(c.live.begin(), c.live.end(),
            [](const Event &a, const Event &b) { return a.time_ns < b.time_ns; });
  std::sort(c.freed.begin(), c.freed.end(), [](const tseal::FreedKey &a, const tseal::FreedKey &b) {
    return std::tie(a.vmm, a.addr) < std::tie(b.vmm, b.addr);
  });
  c.maps = live_.vmm_maps().list();
  c.released = live_.vmm_maps().released();
  const RunSummary &sum = tally_.summary();
  RunSummary &d = c.summary;
  d.events = sum.events;
  d.peak = sum.peak;
  auto tail = [](const auto &v, size_t from) {
    return std::decay_t<decltype(v)>(v.begin() + static_cast<long>(std::min(from, v.size())),
                                     v.end());
  };
  d.invalid_frees = tail(sum.invalid_frees, base_.invalid);
  d.marks = tail(sum.marks, base_.marks);
  d.teardown = tail(sum.teardown, base_.teardown);
  // The OOMs pushed since that the bound has not dropped (past kMaxOoms it
  // drops the oldest after the first kSnapshotFirst), without their
  // snapshots: the main file has them.
  const std::vector<OomRecord> &ooms = sum.ooms;
  size_t fresh =
      std::min<uint64_t>(tally_.ooms_pushed() - base_.ooms_pushed,
                         ooms.size() - std::min<uint64_t>(base_.ooms_pushed, kSnapshotFirst));
  for (size_t i = ooms.size() - fresh; i < ooms.size(); ++i) {
    OomRecord o = ooms[i];
    o.sites_at_oom.clear();
    d.ooms.push_back(std::move(o));
  }
  const std::vector<StepSample> *lists[2] = {&sum.steps, &sum.windows};
  std::vector<StepSample> *out[2] = {&d.steps, &d.windows};
  for (int k = 0; k < 2; ++k) {
    c.halvings[k] = tally_.halvings(k == 1) - base_.halvings[k];
    *out[k] = tail(*lists[k], surviving_base_samples(base_.samples[k], c.halvings[k]));
  }
  return c;
}

}  // namespace torchseal::live
