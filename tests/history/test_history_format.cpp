// The .tseal format as writer and reader see it: codec round trips, chunk
// framing, and the reader's behaviour on damaged or foreign files.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "common/format/event_codec.h"
#include "common/format/records.h"
#include "common/format/tseal_format.h"
#include "report/input/history_reader.h"
#include "report/replay/analysis_replay.h"

using namespace torchseal;
using namespace torchseal::tseal;

namespace {

std::string temp_path(const char *name) {
  return "/tmp/tseal-test-" + std::to_string(getpid()) + "-" + name;
}

void write_file(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char *>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<Event> random_events(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Event> ev;
  std::vector<uint64_t> live;
  uint64_t t = 1000;
  for (size_t i = 0; i < n; ++i) {
    Event e{};
    t += rng() % 5000;
    e.time_ns = t;
    if (!live.empty() && rng() % 2) {
      size_t k = rng() % live.size();
      e.op = Op::Free;
      e.addr = live[k];
      e.api = ApiId::cudaFree;
      live.erase(live.begin() + static_cast<long>(k));
    } else {
      e.op = Op::Alloc;
      e.addr = 0x7f0000000000ull + (rng() % 100000) * 512;
      e.size = 512 * (1 + rng() % 4096);
      e.stack = static_cast<StackId>(1 + rng() % 50);
      e.api = rng() % 3 ? ApiId::cudaMalloc : ApiId::cudaMallocAsync;
      e.stream = e.api == ApiId::cudaMallocAsync ? 0x1234 : 0;
      e.device = static_cast<int16_t>(rng() % 2);
      live.push_back(e.addr);
    }
    e.family = api_info(e.api).family;
    ev.push_back(e);
  }
  return ev;
}

// A minimal but complete file, laid out the way shim/sink/pass_writer.cpp does.
std::vector<uint8_t> make_file(const std::vector<Event> &events, bool with_end) {
  std::vector<uint8_t> out;
  append_file_header(out);
  ProcessRecord proc;
  proc.info.pid = 4242;
  proc.info.hostname = "host";
  proc.info.start_time = 1.7e9;
  proc.info.argv = {"./prog"};
  proc.clock_base = 1.7e9;
  append_record(out, Chunk::Process, proc);
  StacksRecord stacks;
  for (uint32_t id = 1; id <= 50; ++id) stacks.stacks.push_back({id, {0x401000 + id, 0x401010 + id}});
  append_record(out, Chunk::Stacks, stacks);
  for (size_t start = 0; start < events.size(); start += 1000) {
    append_record(out, Chunk::Pass, PassRecord{events[start].time_ns});
    size_t end = std::min(events.size(), start + 1000);
    append_events_chunk(out, 77, std::vector<Event>(events.begin() + static_cast<long>(start),
                                                    events.begin() + static_cast<long>(end)));
  }
  if (with_end) append_record(out, Chunk::End, EndRecord{1.7e9 + 5, events.size(), true, 0});
  return out;
}

// One event from stack 1 on device 0.
Event event_at(Op op, ApiId api, uint64_t addr, uint64_t size, uint64_t t) {
  Event e{};
  e.op = op;
  e.api = api;
  e.family = api < ApiId::Count ? api_info(api).family : Family::None;  // Step has no API
  e.addr = addr;
  e.size = size;
  e.time_ns = t;
  e.stack = 1;
  e.device = 0;
  return e;
}

struct Collect : HistoryListener {
  std::vector<Event> events;
  ProcessInfo process;
  size_t stacks = 0;
  void on_process(const ProcessInfo &p, double) override { process = p; }
  void on_stack(StackId, std::vector<uint64_t> &&) override { ++stacks; }
  void on_event(const Event &e) override { events.push_back(e); }
};

}  // namespace

TEST_CASE("varints and zigzag round trip at the edges") {
  std::vector<uint8_t> buf;
  ByteWriter w(buf);
  uint64_t us[] = {0, 1, 127, 128, 16383, 16384, ~0ull};
  int64_t ss[] = {0, -1, 1, -64, 64, INT64_MIN, INT64_MAX};
  for (auto u : us) w.varint(u);
  for (auto s : ss) w.svarint(s);
  ByteReader r(buf.data(), buf.size());
  for (auto u : us) CHECK(r.varint() == u);
  for (auto s : ss) CHECK(r.svarint() == s);
  CHECK(r.ok());
  CHECK(r.done());
  r.varint();
  CHECK_FALSE(r.ok());  // reading past the end fails, never overreads
}

// Encodes `events` as one chunk's events and decodes them back.
static std::vector<Event> round_trip(const std::vector<Event> &events, std::vector<uint8_t> &buf) {
  ByteWriter w(buf);
  CodecState st;
  st.reset(events.front().time_ns);
  for (const auto &e : events) encode_event(w, st, e);
  ByteReader r(buf.data(), buf.size());
  CodecState ds;
  ds.reset(events.front().time_ns);
  std::vector<Event> out;
  Event d;
  while (decode_event(r, ds, d)) out.push_back(d);
  CHECK(r.ok());
  return out;
}

TEST_CASE("event codec round trips every field it stores") {
  auto events = random_events(20000, 7);
  std::vector<uint8_t> buf;
  const std::vector<Event> decoded = round_trip(events, buf);
  REQUIRE(decoded.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const Event &d = decoded[i], &e = events[i];
    CHECK(d.op == e.op);
    CHECK(d.time_ns == e.time_ns);
    CHECK(d.addr == e.addr);
    CHECK(d.api == e.api);
    if (e.op == Op::Alloc) {
      CHECK(d.size == e.size);
      CHECK(d.stack == e.stack);
      CHECK(d.stream == e.stream);
      CHECK(d.device == e.device);
    }
  }
  // Compactness of the event encoding itself (the benchmark measures files).
  CHECK(static_cast<double>(buf.size()) / static_cast<double>(events.size()) < 12.0);
}

TEST_CASE("Dump events round trip with their trigger; an op past the last is refused") {
  std::vector<Event> events;
  uint64_t t = 5000;
  for (DumpTrigger d : {DumpTrigger::Signal, DumpTrigger::Api, DumpTrigger::Oom,
                        DumpTrigger::Stop}) {
    events.push_back(event_at(Op::Alloc, ApiId::cudaMalloc, 0x1000 + t, 256, t + 10));
    events.push_back(event_at(Op::Dump, ApiId::Unknown, 0, static_cast<uint64_t>(d), t + 20));
    events.push_back(event_at(Op::Mark, ApiId::Unknown, 0, 3, t + 30));
    t += 30;
  }
  std::vector<uint8_t> buf;
  const std::vector<Event> decoded = round_trip(events, buf);
  REQUIRE(decoded.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    CHECK(decoded[i].op == events[i].op);
    CHECK(decoded[i].time_ns == events[i].time_ns);
    CHECK(decoded[i].size == events[i].size);
  }
  CHECK(dump_trigger_name(static_cast<uint64_t>(DumpTrigger::Oom)) == "oom");
  CHECK(dump_trigger_name(99) == "unknown");
  DumpTrigger back;
  CHECK(dump_trigger_from_name("stop", back));
  CHECK(back == DumpTrigger::Stop);
  CHECK_FALSE(dump_trigger_from_name("exit", back));

  // The next op (not defined yet): undecodable, never guessed.
  uint8_t next[] = {static_cast<uint8_t>((static_cast<uint8_t>(kLastOp) + 1) << 4), 1, 0, 0};
  ByteReader nr(next, sizeof next);
  CodecState ns;
  ns.reset(0);
  Event d;
  CHECK_FALSE(decode_event(nr, ns, d));
}

TEST_CASE("reader returns every event in time order from a clean file") {
  auto events = random_events(5000, 3);
  std::string path = temp_path("clean.tseal");
  write_file(path, make_file(events, true));
  Collect c;
  std::string error;
  std::vector<std::string> warnings;
  HistoryReadStats stats;
  REQUIRE(read_history(path, c, error, warnings, &stats));
  CHECK(warnings.empty());
  CHECK(stats.clean_end);
  CHECK(c.process.pid == 4242);
  CHECK(c.process.argv == std::vector<std::string>{"./prog"});
  CHECK(c.stacks == 50);
  REQUIRE(c.events.size() == events.size());
  for (size_t i = 0; i < events.size(); ++i) CHECK(c.events[i].addr == events[i].addr);
  unlink(path.c_str());
}

TEST_CASE("a file cut anywhere reads without crashing and warns truncated") {
  auto events = random_events(3000, 11);
  auto bytes = make_file(events, true);
  std::string path = temp_path("cut.tseal");
  std::mt19937 rng(5);
  size_t prev_events = 0;
  for (int trial = 0; trial < 200; ++trial) {
    size_t cut = kFileHeaderSize + rng() % (bytes.size() - kFileHeaderSize);
    write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(cut)));
    Collect c;
    std::string error;
    std::vector<std::string> warnings;
    REQUIRE(read_history(path, c, error, warnings));
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find("truncated") != std::string::npos);
    CHECK(c.events.size() <= events.size());
    prev_events += c.events.size();
  }
  CHECK(prev_events > 0);  // cuts keep what came before them
  unlink(path.c_str());
}

TEST_CASE("a corrupt byte stops the read at that chunk, with a warning") {
  auto events = random_events(3000, 13);
  auto bytes = make_file(events, true);
  bytes[bytes.size() / 2] ^= 0x5a;
  std::string path = temp_path("corrupt.tseal");
  write_file(path, bytes);
  Collect c;
  std::string error;
  std::vector<std::string> warnings;
  REQUIRE(read_history(path, c, error, warnings));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("truncated") != std::string::npos);
  CHECK(c.events.size() < events.size());
  CHECK(c.events.size() > 0);
  unlink(path.c_str());
}

TEST_CASE("foreign files and unknown versions are rejected with one line") {
  std::string path = temp_path("foreign");
  write_file(path, {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!', '!', '!', '!'});
  Collect c;
  std::string error;
  std::vector<std::string> warnings;
  CHECK_FALSE(read_history(path, c, error, warnings));
  CHECK(error.find("not a torchseal history file") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);

  auto bytes = make_file(random_events(10, 1), true);
  bytes[8] = 99;  // version field
  write_file(path, bytes);
  error.clear();
  CHECK_FALSE(read_history(path, c, error, warnings));
  CHECK(error.find("version 99") != std::string::npos);
  CHECK_FALSE(read_history(temp_path("missing"), c, error, warnings));
  unlink(path.c_str());
}

TEST_CASE("replay rebuilds live state, OOMs, teardown and steps; dumps change nothing") {
  std::vector<Event> ev;
  auto mk = [&](Op op, ApiId api, uint64_t addr, uint64_t size, uint64_t t) {
    ev.push_back(event_at(op, api, addr, size, t));
  };
  mk(Op::Alloc, ApiId::cudaMalloc, 0x1000, 100, 10);
  mk(Op::Alloc, ApiId::cudaMalloc, 0x2000, 200, 20);
  mk(Op::Free, ApiId::cudaFree, 0x1000, 0, 30);
  mk(Op::Step, ApiId::Unknown, 0, 1, 35);
  mk(Op::OomFail, ApiId::cudaMalloc, 0, 1ull << 50, 40);
  mk(Op::Dump, ApiId::Unknown, 0, static_cast<uint64_t>(DumpTrigger::Oom), 45);
  mk(Op::InvalidFree, ApiId::cudaFree, 0xdead, 0, 50);
  mk(Op::Alloc, ApiId::cuMemCreate, 7, 2 << 20, 60);
  mk(Op::Teardown, ApiId::cudaDeviceReset, 0, 0, 70);
  mk(Op::Alloc, ApiId::cudaMallocHost, 0x9000, 64, 80);
  std::string path = temp_path("replay.tseal");
  write_file(path, make_file(ev, true));
  AnalysisInput in;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> symbols;
  std::string error;
  std::vector<std::string> warnings;
  REQUIRE(replay_history(path, in, symbols, error, warnings));
  CHECK(in.events == 7);  // allocs, frees, the OOM and the invalid free; not the dump
  REQUIRE(in.ooms.size() == 1);
  CHECK(in.ooms[0].live_bytes == 200);
  REQUIRE(in.invalid_frees.size() == 1);
  REQUIRE(in.steps.size() == 1);
  CHECK(in.steps[0].sites.size() == 1);
  CHECK(in.steps[0].sites[0].bytes == 200);
  size_t teardown = 0, exit_live = 0;
  for (const auto &a : in.live) (a.detected_at == DetectedAt::ContextTeardown ? teardown : exit_live)++;
  CHECK(teardown == 2);  // 0x2000 and the VMM handle
  CHECK(exit_live == 1);  // the pinned buffer allocated after the reset
  CHECK(in.peak_bytes == 200 + (2u << 20));  // 0x2000 plus the VMM handle
  unlink(path.c_str());
}

TEST_CASE("replay keeps the VMM mappings in force, as the shim does") {
  std::vector<Event> ev;
  auto mk = [&](Op op, ApiId api, uint64_t addr, uint64_t size, uint64_t handle) {
    Event e{};
    e.op = op;
    e.api = api;
    e.family = Family::Vmm;
    e.addr = addr;
    e.size = size;
    e.stream = handle;  // Map's handle
    e.time_ns = 10 * (ev.size() + 1);
    e.device = 0;
    ev.push_back(e);
  };
  const uint64_t va = 0x7f0000000000, mb2 = 2 << 20;
  mk(Op::Reserve, ApiId::cuMemAddressReserve, va, 8 * mb2, 0);
  mk(Op::Alloc, ApiId::cuMemCreate, 7, mb2, 0);
  mk(Op::Alloc, ApiId::cuMemCreate, 8, mb2, 0);
  mk(Op::Map, ApiId::cuMemMap, va, mb2, 7);
  mk(Op::Map, ApiId::cuMemMap, va + mb2, mb2, 8);
  mk(Op::Unmap, ApiId::cuMemUnmap, va + mb2, mb2, 0);
  mk(Op::Free, ApiId::cuMemRelease, 8, 0, 0);
  std::string path = temp_path("vmm-maps.tseal");
  write_file(path, make_file(ev, true));
  AnalysisInput in;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> symbols;
  std::string error;
  std::vector<std::string> warnings;
  REQUIRE(replay_history(path, in, symbols, error, warnings));
  REQUIRE(in.vmm_maps.size() == 1);
  CHECK(in.vmm_maps[0].va == va);
  CHECK(in.vmm_maps[0].size == mb2);
  CHECK(in.vmm_maps[0].handle == 7);
  unlink(path.c_str());
}

TEST_CASE("a file from a crash, with the old flag-less End, still reads") {
  auto events = random_events(500, 17);
  auto bytes = make_file(events, false);
  // The End chunk crash paths wrote before the shapes were unified: f64 end
  // time 1.7e9, varint events (500 = 0xf4 0x03), u8 0 (not clean), no flags.
  const std::vector<uint8_t> old_end = {0x00, 0x00, 0x00, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0xf4, 0x03, 0x00};
  append_chunk(bytes, Chunk::End, old_end);
  std::string path = temp_path("old-crash.tseal");
  write_file(path, bytes);
  Collect c;
  std::string error;
  std::vector<std::string> warnings;
  HistoryReadStats stats;
  REQUIRE(read_history(path, c, error, warnings, &stats));
  CHECK(c.events.size() == events.size());
  CHECK_FALSE(stats.clean_end);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("no clean end") != std::string::npos);
  unlink(path.c_str());
}

TEST_CASE("a chunk type newer than the reader is skipped, not taken for damage") {
  auto events = random_events(500, 19);
  auto bytes = make_file(events, false);
  append_chunk(bytes, static_cast<Chunk>(kLastChunk + 1), {1, 2, 3});
  append_record(bytes, Chunk::End, EndRecord{1.7e9, events.size(), true, 0});
  std::string path = temp_path("newer.tseal");
  write_file(path, bytes);
  Collect c;
  std::string error;
  std::vector<std::string> warnings;
  HistoryReadStats stats;
  REQUIRE(read_history(path, c, error, warnings, &stats));
  CHECK(warnings.empty());
  CHECK(stats.clean_end);
  CHECK(c.events.size() == events.size());
  unlink(path.c_str());
}

TEST_CASE("replay takes the exit verdict: holder scan, site holders, OOMs by their event") {
  std::vector<Event> ev;
  auto mk = [&](Op op, uint64_t addr, uint64_t size, uint64_t t) {
    ev.push_back(event_at(op, ApiId::cudaMalloc, addr, size, t));
  };
  mk(Op::Alloc, 0x1000, 100, 10);
  for (uint64_t k = 0; k < 10; ++k) mk(Op::OomFail, 0, 1000 + k, 40 + k);
  auto bytes = make_file(ev, false);
  std::vector<uint8_t> no_verdict = bytes;
  VerdictRecord v;
  v.scan.done = v.scan.at_exit = true;
  v.scan.chains = {{"global 'model' (Linear) in t.py", ".weight"}};
  v.scan.storages = {{0x1000, 100, 0}};
  v.site_holders.push_back({1, 0, ApiId::cudaMalloc, Family::Device, {{{"global 'kept'"}, 100, 1}}});
  // The shim's order (the order of its decisions), one OOM the file does not
  // hold (thread 78), and one at a time no event has.
  v.ooms.push_back({49, 77, false, {{{"global 'big'"}, 7, 1}}, {}});
  v.ooms.push_back({41, 77, true, {}, {}});
  v.ooms.push_back({42, 78, true, {}, {}});
  v.ooms.push_back({1000, 77, true, {}, {}});
  append_record(bytes, Chunk::Verdict, v);
  for (auto *b : {&bytes, &no_verdict})
    append_record(*b, Chunk::End, EndRecord{1.7e9 + 5, ev.size(), true, 0});

  std::string path = temp_path("verdict.tseal");
  std::unordered_map<uint64_t, std::vector<NativeFrame>> symbols;
  std::string error;
  std::vector<std::string> warnings;
  AnalysisInput in;
  write_file(path, bytes);
  REQUIRE(replay_history(path, in, symbols, error, warnings));
  CHECK(warnings.empty());
  CHECK(in.holders.done);
  CHECK(in.holders.at_exit);
  CHECK(in.holders.chains == v.scan.chains);
  REQUIRE(in.holders.storages.size() == 1);
  CHECK(in.holders.storages[0].addr == 0x1000);
  REQUIRE(in.site_holders.size() == 1);
  CHECK(in.site_holders[0].stack == 1);
  CHECK(in.site_holders[0].holders[0].chain == std::vector<std::string>{"global 'kept'"});
  REQUIRE(in.ooms.size() == 2);
  CHECK(in.ooms[0].requested == 1009);
  CHECK_FALSE(in.ooms[0].recovered);
  REQUIRE(in.ooms[0].holders.size() == 1);
  CHECK(in.ooms[0].holders[0].chain == std::vector<std::string>{"global 'big'"});
  CHECK(in.ooms[0].sites_at_oom.size() == 1);  // the newest OOMs keep their snapshot
  CHECK(in.ooms[1].requested == 1001);
  CHECK(in.ooms[1].recovered);
  CHECK(in.ooms[1].live_bytes == 100);
  CHECK(in.ooms[1].sites_at_oom.size() == 1);

  // Without the chunk (an older or crashed file): the first 8 OOMs, none
  // recovered, no scan, as before.
  write_file(path, no_verdict);
  REQUIRE(replay_history(path, in, symbols, error, warnings));
  CHECK_FALSE(in.holders.done);
  CHECK(in.site_holders.empty());
  REQUIRE(in.ooms.size() == 8);
  for (size_t k = 0; k < 8; ++k) {
    CHECK(in.ooms[k].requested == 1000 + k);
    CHECK_FALSE(in.ooms[k].recovered);
  }
  unlink(path.c_str());
}
