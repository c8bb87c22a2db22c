// A capped history's promise, at the level of the replay: a reader that
// starts from a checkpoint (what the writer saw up to there, encoded and
// decoded as in a segment file) and replays the rest ends with exactly what
// a reader of every event ends with; and a window starts afresh.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>
#include <algorithm>
#include <random>
#include <tuple>

#include "common/format/checkpoint.h"
#include "common/format/segment_files.h"
#include "common/live/checkpoint_state.h"
#include "report/input/chunk_reader.h"
#include "common/format/records.h"
#include "report/replay/analysis_replay.h"
#include "report/replay/replay.h"
#include "report/replay/summary_observer.h"

using namespace torchseal;
using namespace torchseal::tseal;

namespace {

// A seeded run: three threads' allocations and frees at 40 sites, a site
// that grows every step, leaks, steps, OOMs, marks, a VMM mapping. `small`:
// at most 64 churned allocations live and growth every 16th step, so a long
// run replays fast.
std::vector<Event> workload(unsigned seed, size_t n, bool small = false) {
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
    if ((r < 50 && !(small && live.size() >= 64)) || live.empty()) {
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
      if (!small || step % 16 == 0) {
        Event e = ev(Op::Alloc);  // the growing site: never freed
        e.addr = next_addr += 4096;
        e.size = 1 << 20;
        e.stack = 99;
        out.push_back(e);
      }
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

// The OOM snapshots of a summary, as the writer puts them in the main file.
void add_snapshots(std::unordered_multimap<uint64_t, OomSnapshotRecord> &out, const RunSummary &s) {
  for (const OomRecord &o : s.ooms)
    if (!o.sites_at_oom.empty())
      out.emplace(oom_key(o.time_ns, o.tid), OomSnapshotRecord{o.time_ns, o.tid, o.sites_at_oom});
}

void same_result(const Result &got, const Result &want) {
  CHECK(got.live == want.live);
  CHECK(got.live_bytes == want.live_bytes);
  CHECK(got.sum.peak == want.sum.peak);
  CHECK(got.sum.events == want.sum.events);
  CHECK(got.sum.marks.size() == want.sum.marks.size());
  CHECK(got.sum.invalid_frees.size() == want.sum.invalid_frees.size());
  REQUIRE(got.sum.ooms.size() == want.sum.ooms.size());
  for (size_t i = 0; i < want.sum.ooms.size(); ++i) {
    CHECK(got.sum.ooms[i].time_ns == want.sum.ooms[i].time_ns);
    CHECK(got.sum.ooms[i].live_bytes == want.sum.ooms[i].live_bytes);
    // The same sites and totals; their first-seen order follows the live
    // table's, which a restore does not keep.
    auto sites = [](const OomRecord &o) {
      std::vector<std::tuple<StackId, uint64_t, uint64_t>> v;
      for (const SiteSample &x : o.sites_at_oom) v.emplace_back(x.stack, x.bytes, x.allocations);
      std::sort(v.begin(), v.end());
      return v;
    };
    CHECK(sites(got.sum.ooms[i]) == sites(want.sum.ooms[i]));
  }
  CHECK(got.maps.size() == want.maps.size());
  same(got.sum.steps, want.sum.steps);
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
  std::unordered_multimap<uint64_t, OomSnapshotRecord> snapshots;
  add_snapshots(snapshots, c.summary);
  attach_oom_snapshots(back.summary, snapshots);

  SummaryObserver tail_obs;
  Replay tail(tail_obs);
  tail.on_label(1, "mark");
  tail.on_checkpoint(std::move(back), true);
  for (size_t i = cut; i < run.size(); ++i) tail.on_event(run[i]);
  same_result(finish(tail, tail_obs), want);
}

TEST_CASE("a checkpoint stored as the change since its base ends where every event ends") {
  // Long enough that the step samples are halved and the OOM list passes its
  // bound between the base and the checkpoint.
  std::vector<Event> run = workload(4, 450000, true);
  SummaryObserver full_obs;
  Replay full(full_obs);
  full.on_label(1, "mark");
  for (const Event &e : run) full.on_event(e);
  Result want = finish(full, full_obs);
  REQUIRE(full_obs.halvings(false) >= 2);
  REQUIRE(!want.sum.steps.front().sites.empty());  // a halving keeps the first sample whole
  REQUIRE(full_obs.ooms_pushed() > kMaxOoms);

  size_t at_base = run.size() * 6 / 10, at_delta = run.size() * 95 / 100;
  // The capped writer's state, fed the events as it writes them.
  live::CheckpointState head_obs;
  head_obs.on_label(1, "mark");
  for (size_t i = 0; i < at_base; ++i) head_obs.apply(run[i]);
  std::unordered_multimap<uint64_t, OomSnapshotRecord> snapshots;
  CheckpointRecord base = head_obs.whole(3, run[at_base - 1].time_ns, head_obs.tally().last_step());
  add_snapshots(snapshots, base.summary);
  uint64_t halvings = head_obs.tally().halvings(false);
  head_obs.rebase(3);
  CHECK(head_obs.delta(3, 0, 0).live.empty());  // nothing changed yet
  // A change without a halving keeps every sample of the base, whole.
  size_t soon = at_base + 2000;
  for (size_t i = at_base; i < soon; ++i) head_obs.apply(run[i]);
  REQUIRE(head_obs.tally().halvings(false) == halvings);
  {
    CheckpointRecord early = through_chunks(base);
    REQUIRE(apply_to_base(early, through_chunks(head_obs.delta(4, 0, 0))));
    same(early.summary.steps, head_obs.tally().summary().steps);
  }
  for (size_t i = soon; i < at_delta; ++i) head_obs.apply(run[i]);
  REQUIRE(head_obs.tally().halvings(false) > halvings);
  CheckpointRecord d = head_obs.delta(5, run[at_delta - 1].time_ns, head_obs.tally().last_step());
  add_snapshots(snapshots, head_obs.tally().summary());
  CHECK(d.base == 3);
  CHECK(!d.freed.empty());
  CHECK(d.live.size() < head_obs.live().size());  // the change, not the live set

  CheckpointRecord whole = through_chunks(base);
  CheckpointRecord change = through_chunks(d);
  CHECK(change.base == 3);
  CHECK(change.freed.size() == d.freed.size());
  REQUIRE(apply_to_base(whole, std::move(change)));
  CHECK(whole.seq == 5);
  CHECK(whole.base == 0);
  CHECK(whole.live.size() == head_obs.live().size());
  attach_oom_snapshots(whole.summary, snapshots);

  SummaryObserver tail_obs;
  Replay tail(tail_obs);
  tail.on_label(1, "mark");
  tail.on_checkpoint(std::move(whole), true);
  for (size_t i = at_delta; i < run.size(); ++i) tail.on_event(run[i]);
  same_result(finish(tail, tail_obs), want);
}

TEST_CASE("a change that frees what its base does not have does not apply") {
  CheckpointRecord base;
  base.seq = 1;
  CheckpointRecord d;
  d.seq = 2;
  d.base = 1;
  d.freed.push_back({false, 0x1000});
  CHECK_FALSE(apply_to_base(base, std::move(d)));
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

namespace {

void write_bytes(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A file header of format version 1 (the version before base checkpoints).
std::vector<uint8_t> v1_header(uint32_t flags) {
  std::vector<uint8_t> out;
  append_file_header(out, flags);
  out[8] = 1;
  return out;
}

template <typename Fn>
void v1_chunk(std::vector<uint8_t> &out, Chunk type, Fn &&body) {
  std::vector<uint8_t> payload;
  ByteWriter w(payload);
  body(w);
  append_chunk(out, type, payload);
}

Event v1_alloc(uint64_t addr, uint64_t size, StackId stack, uint64_t t) {
  Event e{};
  e.op = Op::Alloc;
  e.api = ApiId::cudaMalloc;
  e.family = Family::Device;
  e.addr = addr;
  e.size = size;
  e.stack = stack;
  e.time_ns = t;
  e.device = 0;
  e.tid = 77;
  return e;
}

}  // namespace

// Version 1 wrote every checkpoint whole, an OOM's live set in full inside
// it (part kind 4), and shorter CheckpointBegin and Segment chunks. This is
// such a history, byte for byte as that writer laid it out, with its first
// segment dropped: the whole-run read starts at segment 2's checkpoint.
TEST_CASE("a version 1 capped history still reads") {
  std::string path = "/tmp/tseal-test-" + std::to_string(getpid()) + "-v1.tseal";
  const uint64_t t0 = 1000000;
  std::vector<uint8_t> main = v1_header(kFlagSegmented);
  ProcessRecord proc;
  proc.info.pid = 4242;
  proc.info.start_time = 1.7e9;
  proc.clock_base = 1.7e9;
  append_record(main, Chunk::Process, proc);
  StacksRecord stacks;
  for (uint32_t id = 1; id <= 3; ++id) stacks.stacks.push_back({id, {0x401000 + id}});
  append_record(main, Chunk::Stacks, stacks);
  for (uint64_t seq : {1, 2})  // version 1's Segment: ten fields
    v1_chunk(main, Chunk::Segment, [&](ByteWriter &w) {
      for (uint64_t v : std::initializer_list<uint64_t>{seq, t0 + seq * 100, t0 + seq * 100 + 50, uint64_t{0}, uint64_t{0},
                         uint64_t{2}, uint64_t{4096}})
        w.varint(v);
      w.u8(seq == 1 ? kPinFirst : 0);
      w.varint(1 << 20);
      w.varint(64 << 10);
    });
  append_record(main, Chunk::End, EndRecord{1.7e9 + 5, 5, true, 0});
  write_bytes(path, main);

  // Segment 2: live there, 0x1000 (stack 1) and 0x2000, 0x3000 (stack 2);
  // one OOM before it, when 0x1000 and 0x2000 were live.
  std::vector<uint8_t> seg = v1_header(kFlagSegment);
  v1_chunk(seg, Chunk::CheckpointBegin, [&](ByteWriter &w) {
    w.varint(2);
    w.varint(t0 + 150);
    w.varint(0);
  });
  std::vector<Event> live = {v1_alloc(0x1000, 100, 1, t0 + 1), v1_alloc(0x2000, 200, 2, t0 + 2),
                             v1_alloc(0x3000, 300, 2, t0 + 4)};
  v1_chunk(seg, Chunk::CheckpointPart, [&](ByteWriter &w) {
    w.u8(1);  // live
    w.varint(live.size());
    for (const Event &e : live) {
      for (uint64_t v : std::initializer_list<uint64_t>{e.time_ns, e.addr, e.size, e.stream, uint64_t{e.stack},
                         uint64_t{e.pystack}, uint64_t{e.tid}, uint64_t{0} /* api */})
        w.varint(v);
      w.u8(static_cast<uint8_t>(e.family));
      w.svarint(e.device);
      w.varint(e.context);
    }
  });
  v1_chunk(seg, Chunk::CheckpointPart, [&](ByteWriter &w) {
    w.u8(2);  // maps
    w.varint(0);
  });
  v1_chunk(seg, Chunk::CheckpointPart, [&](ByteWriter &w) {
    w.u8(3);  // totals: events, peak, no invalid frees, marks or teardown leaks
    for (uint64_t v : std::initializer_list<uint64_t>{4, 600, 0, 0, 0}) w.varint(v);
  });
  v1_chunk(seg, Chunk::CheckpointPart, [&](ByteWriter &w) {
    w.u8(4);  // an OOM with its live set in full
    for (uint64_t v : std::initializer_list<uint64_t>{0, 1ull << 40}) w.varint(v);
    w.svarint(0);
    for (uint64_t v : std::initializer_list<uint64_t>{300, 3, 0, t0 + 3, 77}) w.varint(v);
    w.varint(2);
    for (const Event &e : {live[0], live[1]}) {
      for (uint64_t v : std::initializer_list<uint64_t>{e.addr, e.size, uint64_t{e.stack}, uint64_t{0}, uint64_t{0}}) w.varint(v);
      w.u8(0);
      w.svarint(0);
      w.u8(0);
    }
  });
  append_record(seg, Chunk::Pass, PassRecord{t0 + 200});
  Event freed{};
  freed.op = Op::Free;
  freed.api = ApiId::cudaFree;
  freed.family = Family::Device;
  freed.addr = 0x2000;
  freed.time_ns = t0 + 200;
  append_events_chunk(seg, 77, {freed});
  write_bytes(segment_path(path, 2), seg);

  AnalysisInput in;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> symbols;
  std::string error;
  std::vector<std::string> warnings;
  REQUIRE(replay_history(path, in, symbols, error, warnings));
  CHECK(error.empty());
  CHECK(in.events == 5);
  CHECK(in.peak_bytes == 600);
  CHECK(in.live.size() == 2);  // 0x1000 and 0x3000
  REQUIRE(in.ooms.size() == 1);
  CHECK(in.ooms[0].live_bytes == 300);
  REQUIRE(in.ooms[0].sites_at_oom.size() == 2);  // the live set, by site
  CHECK(in.ooms[0].sites_at_oom[0].stack == 1);
  CHECK(in.ooms[0].sites_at_oom[0].bytes == 100);
  CHECK(in.ooms[0].sites_at_oom[1].bytes == 200);
  unlink(segment_path(path, 2).c_str());
  unlink(path.c_str());
}
