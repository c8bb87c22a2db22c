#include "common/live/run_tally.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "common/live/live_rules.h"

namespace torchseal::live {

std::string RunTally::label(uint64_t id) const {
  auto it = id <= UINT32_MAX ? labels_.find(static_cast<uint32_t>(id)) : labels_.end();
  return it != labels_.end() ? it->second : "#" + std::to_string(id);
}

void RunTally::on_event(const Event &e, const LiveSet &live) {
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
      oom(e, live);
      ++sum_.events;
      notable_ |= kSawOom;
      break;
    case Op::Step:
      step(e, live);
      break;
    case Op::Mark:
      if (sum_.marks.size() < kMaxMarks)
        sum_.marks.push_back(
            {clock_base_ + static_cast<double>(e.time_ns) / 1e9, label(e.size), e.tid});
      notable_ |= kSawMark;
      break;
    case Op::Dump:
      notable_ |= kSawMark;  // a dump's report points into the history here
      break;
    default:
      break;  // VMM mappings: the live set keeps them
  }
}

void RunTally::on_alloc(const Event &e, const LiveSet &live) {
  sum_.peak = std::max(sum_.peak, live.live_bytes() + e.size);
}

void RunTally::on_teardown(const std::vector<const LiveEntry *> &dying) {
  for (const LiveEntry *r : dying) {
    LiveAlloc a = live_alloc_of(r->alloc);
    a.detected_at = DetectedAt::ContextTeardown;
    sum_.teardown.push_back(a);
  }
}

void RunTally::restart(RunSummary &&summary, bool whole, const LiveSet &live) {
  sum_ = whole ? std::move(summary) : RunSummary{};
  if (!whole) sum_.peak = live.live_bytes();
}

// Every OOM until the bound, with the live set at that moment for the
// first ones (all a report lists without a verdict) and the newest ones
// (the OOM the program saw often comes after many recovered retries).
void RunTally::oom(const Event &e, const LiveSet &live) {
  OomRecord o;
  o.api = e.api;
  o.requested = e.size;
  o.device = e.device;
  o.stack = e.stack;
  o.pystack = e.pystack;
  o.live_bytes = live.live_bytes();
  o.time_ns = e.time_ns;
  o.tid = e.tid;
  SiteTally tally;
  live.for_each_live([&](const LiveEntry &r) {
    tally.add(r.alloc.stack, r.alloc.pystack, r.alloc.api, r.alloc.family, r.alloc.size);
  });
  o.sites_at_oom = tally.take();
  push_oom(sum_.ooms, std::move(o));
  ++ooms_pushed_;
}

void RunTally::step(const Event &e, const LiveSet &live) {
  bool window = (e.size & kWindowStepBit) != 0;
  StepSample sample;
  sample.step = e.size & ~kWindowStepBit;
  sample.time_ns = e.time_ns;
  // Time windows count as steps too, as a step range (Replay) counts them:
  // the segment index must place `--steps` on a TORCHSEAL_STEP_SECONDS run.
  last_step_ = sample.step;
  StepSites sites;
  live.for_each_live([&](const LiveEntry &r) {
    const Event &a = r.alloc;
    sites.add(a.stack, a.pystack, a.api, a.family, a.size);
  });
  sample.sites = sites.take();
  // In one order whatever the table's: a checkpoint's samples are written as
  // changes from the previous one, site by site.
  std::sort(sample.sites.begin(), sample.sites.end(), [](const SiteSample &a, const SiteSample &b) {
    return std::tie(a.stack, a.pystack, a.api) < std::tie(b.stack, b.pystack, b.api);
  });
  if (push_step_sample(window ? sum_.windows : sum_.steps, std::move(sample))) ++halvings_[window];
}

}  // namespace torchseal::live
