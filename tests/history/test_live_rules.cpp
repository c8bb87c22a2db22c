// common/live: the live-state rules the recorder, the replay and the capped
// writer share, and the writer's state kept from the events against the
// replay of the same events.
#include <catch2/catch.hpp>

#include "common/live/checkpoint_state.h"
#include "common/live/live_rules.h"
#include "common/live/live_set.h"
#include "report/replay/replay.h"
#include "report/replay/summary_observer.h"

using namespace torchseal;

namespace {

Event ev(Op op, Family f, uint64_t addr, uint64_t size = 0, uint64_t t = 0) {
  Event e{};
  e.op = op;
  e.family = f;
  e.addr = addr;
  e.size = size;
  e.time_ns = t;
  e.device = -1;
  return e;
}

Event alloc_on(uint64_t addr, int dev, uint32_t ctx) {
  Event e = ev(Op::Alloc, Family::Device, addr, 100);
  e.device = static_cast<int16_t>(dev);
  e.context = ctx;
  return e;
}

Event teardown(int dev, uint32_t ctx) {
  Event e = ev(Op::Teardown, Family::None, 0);
  e.device = static_cast<int16_t>(dev);
  e.context = ctx;
  return e;
}

}  // namespace

TEST_CASE("a teardown ends its context's allocations, else its device's, else every device's") {
  CHECK(live::ends_at_teardown(7, 0, 7, 1));
  CHECK_FALSE(live::ends_at_teardown(7, 0, 8, 0));
  CHECK(live::ends_at_teardown(0, 1, 9, 1));
  CHECK_FALSE(live::ends_at_teardown(0, 1, 9, 0));
  CHECK(live::ends_at_teardown(0, -1, 9, 3));

  LiveSet s;
  s.apply(alloc_on(0x1000, 0, 7), nullptr);
  s.apply(alloc_on(0x2000, 0, 8), nullptr);
  s.apply(alloc_on(0x3000, 1, 9), nullptr);
  s.apply(teardown(0, 7), nullptr);
  CHECK(s.size() == 2);
  s.apply(teardown(1, 0), nullptr);
  CHECK(s.size() == 1);
  s.apply(teardown(-1, 0), nullptr);
  CHECK(s.size() == 0);
  CHECK(s.live_bytes() == 0);
}

TEST_CASE("an allocation at a live address replaces it; a free of an unknown one changes nothing") {
  struct Count : LiveSet::Listener {
    int allocs = 0, releases = 0;
    uint64_t on_alloc(const Event &) override { return ++allocs; }
    void on_release(const Event &, const LiveEntry &) override { ++releases; }
  } c;
  LiveSet s;
  s.apply(ev(Op::Alloc, Family::Device, 0x1000, 100), &c);
  s.apply(ev(Op::Alloc, Family::Device, 0x1000, 300), &c);
  CHECK(c.releases == 1);
  CHECK(s.size() == 1);
  CHECK(s.live_bytes() == 300);
  s.apply(ev(Op::Free, Family::Device, 0x9000), &c);
  CHECK(c.releases == 1);
  CHECK(s.live_bytes() == 300);
  s.for_each_live([](const LiveEntry &r) { CHECK(r.tag == 2); });
}

TEST_CASE("a VMM handle released while mapped lives until its last unmap") {
  LiveSet s;
  s.apply(ev(Op::Alloc, Family::Vmm, 0x77, 2 << 20), nullptr);  // cuMemCreate: handle 0x77
  Event map = ev(Op::Map, Family::Vmm, 0x7f0000000000, 2 << 20);
  map.stream = 0x77;
  s.apply(map, nullptr);
  s.apply(ev(Op::Free, Family::Vmm, 0x77), nullptr);  // cuMemRelease while mapped
  CHECK(s.size() == 1);
  CHECK(s.vmm_maps().released().size() == 1);
  Event unmap = ev(Op::Unmap, Family::Vmm, 0x7f0000000000, 2 << 20);
  s.apply(unmap, nullptr);
  CHECK(s.size() == 0);
  CHECK(s.live_bytes() == 0);
}

TEST_CASE("a step sample's sites are (stack, Python stack, API), never merged by a hash") {
  // The two keys the replay's old hash gave one value:
  // (stack << 32 | pystack) ^ (api << 48).
  live::StepSites sites;
  sites.add(1u << 16, 0, ApiId{0}, Family::Device, 10);
  sites.add(0, 0, ApiId{1}, Family::Device, 20);
  sites.add(0, 0, ApiId{1}, Family::Device, 5);
  std::vector<SiteSample> got = sites.take();
  REQUIRE(got.size() == 2);
  CHECK(got[0].bytes == 10);
  CHECK(got[1].bytes == 25);
  CHECK(got[1].allocations == 2);
}

TEST_CASE("the capped writer's state, kept from the events, is the replay's of them") {
  std::vector<Event> run;
  uint64_t t = 1000;
  for (uint64_t i = 0; i < 2000; ++i) {
    Event e = ev(Op::Alloc, Family::Device, 0x10000 + (i % 300) * 0x100, 64 + i % 7, t += 3);
    e.stack = static_cast<StackId>(1 + i % 13);
    e.device = 0;
    e.context = 1 + (i % 2);
    run.push_back(e);
    if (i % 3 == 0) run.push_back(ev(Op::Free, Family::Device, 0x10000 + (i % 250) * 0x100, 0, t += 3));
    if (i % 100 == 99) run.push_back(ev(Op::Step, Family::None, 0, i / 100 + 1, t += 3));
    if (i == 1500) {
      Event oom = ev(Op::OomFail, Family::Device, 0, 1 << 30, t += 3);
      oom.device = 0;
      run.push_back(oom);
    }
    if (i == 1700) run.push_back(teardown(0, 2));
  }
  SummaryObserver obs;
  Replay replay(obs);
  live::CheckpointState ck;
  for (const Event &e : run) {
    replay.on_event(e);
    ck.apply(e);
  }
  const RunSummary &a = obs.summary(), &b = ck.tally().summary();
  CHECK(replay.live_bytes() == ck.live().live_bytes());
  CHECK(replay.live_events().size() == ck.live().size());
  CHECK(a.events == b.events);
  CHECK(a.peak == b.peak);
  CHECK(a.teardown.size() == b.teardown.size());
  CHECK(!b.teardown.empty());
  REQUIRE(a.ooms.size() == 1);
  REQUIRE(b.ooms.size() == 1);
  CHECK(a.ooms[0].sites_at_oom.size() == b.ooms[0].sites_at_oom.size());
  REQUIRE(a.steps.size() == b.steps.size());
  for (size_t i = 0; i < a.steps.size(); ++i) {
    REQUIRE(a.steps[i].sites.size() == b.steps[i].sites.size());
    for (size_t k = 0; k < a.steps[i].sites.size(); ++k) {
      CHECK(a.steps[i].sites[k].stack == b.steps[i].sites[k].stack);
      CHECK(a.steps[i].sites[k].bytes == b.steps[i].sites[k].bytes);
    }
  }
}
