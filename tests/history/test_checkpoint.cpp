// A capped history's promise, at the level of the replay: a reader that
// starts from a checkpoint (what the writer saw up to there, encoded and
// decoded as in a segment file) and replays the rest ends with exactly what
// a reader of every event ends with; and a window starts afresh.
#include <catch2/catch.hpp>

#include <random>

#include "report/format/checkpoint.h"
#include "report/input/chunk_reader.h"
#include "report/replay/replay.h"
#include "report/replay/summary_observer.h"

using namespace torchseal;
using namespace torchseal::tseal;

namespace {

// A seeded run: three threads' allocations and frees at 40 sites, a site
// that grows every step, leaks, steps, OOMs, marks, a VMM mapping.
std::vector<Event> workload(unsigned seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<Event> out;
  std::vector<uint64_t> live;
  uint64_t t = 1000, next_addr = 0x7f0000000000, step = 0;
  auto ev = [&](Op op) {
    Event e{};
    e.time_ns = t += 1 + rng() % 50;
    e.op = op;
    e.tid = 100 + static_cast<uint32_t>(rng() % 3);
    e.api = ApiId{0};
    e.family = Family::Device;
    e.device = 0;
    return e;
  };
  for (size_t i = 0; i < n; ++i) {
    uint64_t r = rng() % 100;
    if (r < 50 || live.empty()) {
      Event e = ev(Op::Alloc);
      e.addr = next_addr += 4096;
      e.size = 512 * (1 + rng() % 64);
      e.stack = 1 + static_cast<StackId>(rng() % 40);
      live.push_back(e.addr);
      out.push_back(e);
    } else if (r < 95) {
      size_t k = rng() % live.size();
      Event e = ev(Op::Free);
      e.addr = live[k];
      live.erase(live.begin() + static_cast<long>(k));
      out.push_back(e);
    } else if (r < 97) {
      Event e = ev(Op::Alloc);  // the growing site: never freed
      e.addr = next_addr += 4096;
      e.size = 1 << 20;
      e.stack = 99;
      out.push_back(e);
      Event s = ev(Op::Step);
      s.size = ++step;
      s.family = Family::None;
      out.push_back(s);
    } else if (r < 98) {
      Event e = ev(Op::OomFail);
      e.size = 1ull << 40;
      e.stack = 7;
      out.push_back(e);
    } else if (r < 99) {
      Event e = ev(Op::Mark);
      e.size = 1;
      e.family = Family::None;
      out.push_back(e);
    } else {
      Event e = ev(Op::Map);
      e.addr = next_addr += 1 << 21;
      e.size = 1 << 21;
      e.stream = 5;
      out.push_back(e);
    }
  }
  return out;
}

struct Result {
  RunSummary sum;
  std::vector<VmmMap> maps;
  uint64_t live = 0, live_bytes = 0;
};

Result finish(const Replay &replay, const SummaryObserver &obs) {
  Result r;
  r.sum = obs.summary();
  r.maps = replay.vmm_maps().list();
  replay.for_each_live([&](const ReplayRecord &rec) {
    ++r.live;
    r.live_bytes += rec.alloc.size;
  });
  return r;
}

void same(const std::vector<StepSample> &a, const std::vector<StepSample> &b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].step == b[i].step);
    CHECK(a[i].time_ns == b[i].time_ns);
    REQUIRE(a[i].sites.size() == b[i].sites.size());
    for (size_t k = 0; k < a[i].sites.size(); ++k) {
      CHECK(a[i].sites[k].stack == b[i].sites[k].stack);
      CHECK(a[i].sites[k].bytes == b[i].sites[k].bytes);
      CHECK(a[i].sites[k].allocations == b[i].sites[k].allocations);
    }
  }
}

// The checkpoint's chunks, read back as a reader reads a segment file.
CheckpointRecord through_chunks(const CheckpointRecord &c) {
  std::vector<uint8_t> bytes;
  append_checkpoint(bytes, c);
  CheckpointReader cr;
  size_t at = 0;
  while (at < bytes.size()) {
    const uint8_t *h = bytes.data() + at;
    uint32_t len = h[4] | h[5] << 8 | h[6] << 16 | static_cast<uint32_t>(h[7]) << 24;
    ByteReader r(h + kChunkHeaderSize, len);
    if (h[0] == static_cast<uint8_t>(Chunk::CheckpointBegin)) {
      REQUIRE(cr.begin(r));
    } else {
      REQUIRE(h[0] == static_cast<uint8_t>(Chunk::CheckpointPart));
      REQUIRE(cr.part(r));
    }
    at += kChunkHeaderSize + len;
  }
  REQUIRE(cr.active());
  return cr.take();
}

}  // namespace

TEST_CASE("a replay resumed from a checkpoint ends where a replay of every event ends") {
  auto seed = GENERATE(1u, 2u, 3u);
  std::vector<Event> run = workload(seed, 60000);

  SummaryObserver full_obs;
  Replay full(full_obs);
  full.on_label(1, "mark");
  for (const Event &e : run) full.on_event(e);
  Result want = finish(full, full_obs);
  REQUIRE(want.sum.steps.size() > 100);
  REQUIRE(!want.sum.ooms.empty());
  REQUIRE(!want.maps.empty());

  size_t cut = run.size() * 2 / 3;
  SummaryObserver head_obs;
  Replay head(head_obs);
  head.on_label(1, "mark");
  for (size_t i = 0; i < cut; ++i) head.on_event(run[i]);
  CheckpointRecord c;
  c.seq = 7;
  c.time_ns = run[cut - 1].time_ns;
  c.step = head_obs.last_step();
  c.live = head.live_events();
  c.maps = head.vmm_maps().list();
  c.summary = head_obs.summary();
  CheckpointRecord back = through_chunks(c);
  CHECK(back.seq == 7);
  CHECK(back.live.size() == c.live.size());

  SummaryObserver tail_obs;
  Replay tail(tail_obs);
  tail.on_label(1, "mark");
  tail.on_checkpoint(std::move(back), true);
  for (size_t i = cut; i < run.size(); ++i) tail.on_event(run[i]);
  Result got = finish(tail, tail_obs);

  CHECK(got.live == want.live);
  CHECK(got.live_bytes == want.live_bytes);
  CHECK(got.sum.peak == want.sum.peak);
  CHECK(got.sum.events == want.sum.events);
  CHECK(got.sum.marks.size() == want.sum.marks.size());
  CHECK(got.sum.ooms.size() == want.sum.ooms.size());
  for (size_t i = 0; i < want.sum.ooms.size() && i < got.sum.ooms.size(); ++i) {
    CHECK(got.sum.ooms[i].live_bytes == want.sum.ooms[i].live_bytes);
    CHECK(got.sum.ooms[i].live_at_oom.size() == want.sum.ooms[i].live_at_oom.size());
  }
  CHECK(got.maps.size() == want.maps.size());
  same(got.sum.steps, want.sum.steps);
}

TEST_CASE("a window starts afresh: what was live before it is restored, its lists are its own") {
  std::vector<Event> run = workload(9, 20000);
  HistoryWindow w;
  w.by_steps = true;
  w.from_step = 20;
  w.to_step = 30;
  SummaryObserver obs;
  Replay replay(obs);
  replay.set_window(w);
  for (const Event &e : run) replay.on_event(e);
  replay.on_read_done();
  const RunSummary &s = obs.summary();
  REQUIRE(s.steps.size() == 11);  // the step before the window ends where it begins
  CHECK(s.steps.front().step == 20);
  CHECK(s.steps.back().step == 30);
  CHECK(replay.done());
  // The peak counts what was live before the window, not only its own.
  uint64_t at_first = 0;
  for (const SiteSample &x : s.steps.front().sites) at_first += x.bytes;
  CHECK(s.peak >= at_first);
  CHECK(at_first >= 19u << 20);  // the growing site's 19 MiB from before the window
}

TEST_CASE("damaged checkpoint parts fail to decode") {
  CheckpointRecord c;
  c.live.resize(3);
  for (Event &e : c.live) e.size = 1;
  std::vector<uint8_t> bytes;
  append_checkpoint(bytes, c);
  // The first part after the begin chunk: truncate its payload by one byte.
  const uint8_t *h = bytes.data();
  uint32_t len0 = h[4] | h[5] << 8;
  const uint8_t *p = h + kChunkHeaderSize + len0;
  uint32_t len = p[4] | p[5] << 8 | p[6] << 16;
  for (uint32_t n = 1; n < len; ++n) {
    CheckpointReader cr;
    ByteReader b(h + kChunkHeaderSize, len0);
    REQUIRE(cr.begin(b));
    ByteReader r(p + kChunkHeaderSize, n);
    CHECK_FALSE(cr.part(r));
  }
}
