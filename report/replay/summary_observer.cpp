#include "report/replay/summary_observer.h"

#include "common/format/checkpoint.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace torchseal {

void SummaryObserver::on_event(const Event &e) {
  switch (e.op) {
    case Op::Alloc:
    case Op::Free:
      ++sum_.events;
      break;
    case Op::InvalidFree:
      if (sum_.invalid_frees.size() < 1000)
        sum_.invalid_frees.push_back({e.api, e.addr, e.stack, e.pystack});
      ++sum_.events;
      break;
    case Op::OomFail:
      oom(e);
      ++sum_.events;
      notable_ |= tseal::kPinOom;
      break;
    case Op::Step:
      step(e);
      break;
    case Op::Mark:
      if (sum_.marks.size() < kMaxMarks)
        sum_.marks.push_back(
            {clock_base_ + static_cast<double>(e.time_ns) / 1e9, replay_->label(e.size), e.tid});
      notable_ |= tseal::kPinMark;
      break;
    case Op::Dump:
      notable_ |= tseal::kPinMark;  // a dump's report points into the history here
      break;
    default:
      break;  // VMM mappings: the replay keeps them
  }
}

uint64_t SummaryObserver::on_alloc(const Event &e) {
  sum_.peak = std::max(sum_.peak, replay_->live_bytes() + e.size);
  return 0;
}

void SummaryObserver::on_teardown(const Event &, const std::vector<const ReplayRecord *> &dying) {
  for (const ReplayRecord *r : dying) {
    LiveAlloc a = live_alloc_of(r->alloc);
    a.detected_at = DetectedAt::ContextTeardown;
    sum_.teardown.push_back(a);
  }
}

void SummaryObserver::on_checkpoint(RunSummary &&summary, bool whole) {
  // A window starts with the live state only: its lists are its own.
  sum_ = whole ? std::move(summary) : RunSummary{};
  if (!whole) sum_.peak = replay_->live_bytes();
}

// Every OOM until the bound, with the live set at that moment for the
// first ones (all a report lists without a verdict) and the newest ones
// (the OOM the program saw often comes after many recovered retries).
void SummaryObserver::oom(const Event &e) {
  OomRecord o;
  o.api = e.api;
  o.requested = e.size;
  o.device = e.device;
  o.stack = e.stack;
  o.pystack = e.pystack;
  o.live_bytes = replay_->live_bytes();
  o.time_ns = e.time_ns;
  o.tid = e.tid;
  SiteTally tally;
  replay_->for_each_live([&](const ReplayRecord &r) {
    tally.add(r.alloc.stack, r.alloc.pystack, r.alloc.api, r.alloc.family, r.alloc.size);
  });
  o.sites_at_oom = tally.take();
  push_oom(sum_.ooms, std::move(o));
  ++ooms_pushed_;
}

void SummaryObserver::step(const Event &e) {
  bool window = (e.size & kWindowStepBit) != 0;
  StepSample sample;
  sample.step = e.size & ~kWindowStepBit;
  sample.time_ns = e.time_ns;
  // Time windows count as steps too, as a step range (Replay) counts them:
  // the segment index must place `--steps` on a TORCHSEAL_STEP_SECONDS run.
  last_step_ = sample.step;
  std::unordered_map<uint64_t, size_t> index;
  replay_->for_each_live([&](const ReplayRecord &r) {
    const Event &a = r.alloc;
    uint64_t key =
        (static_cast<uint64_t>(a.stack) << 32 | a.pystack) ^ (static_cast<uint64_t>(a.api) << 48);
    auto it = index.find(key);
    if (it == index.end()) {
      index.emplace(key, sample.sites.size());
      sample.sites.push_back({a.stack, a.pystack, a.api, a.family, a.size, 1});
    } else {
      sample.sites[it->second].bytes += a.size;
      sample.sites[it->second].allocations += 1;
    }
  });
  // In one order whatever the table's: a checkpoint's samples are written as
  // changes from the previous one, site by site.
  std::sort(sample.sites.begin(), sample.sites.end(), [](const SiteSample &a, const SiteSample &b) {
    return std::tie(a.stack, a.pystack, a.api) < std::tie(b.stack, b.pystack, b.api);
  });
  if (push_step_sample(window ? sum_.windows : sum_.steps, std::move(sample))) ++halvings_[window];
}

}  // namespace torchseal
