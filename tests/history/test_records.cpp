// Every chunk record: encode/decode round trip, and a clear failure (false,
// never a read past the payload) on every truncation and on corrupt counts.
#include <catch2/catch.hpp>

#include <cstring>
#include <tuple>

#include "common/format/records.h"

using namespace torchseal;
using namespace torchseal::tseal;

namespace {

template <typename Record>
std::vector<uint8_t> bytes_of(const Record &rec) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  rec.encode(w);
  return out;
}

// Decoding every strict prefix must fail cleanly: a truncated chunk can
// never pass for a shorter valid one. Checked under ASan too: the decoder
// reads from an exact-size heap copy, so an overread would be reported.
template <typename Record>
void check_truncations(const std::vector<uint8_t> &full, size_t older_end = 0) {
  for (size_t n = 0; n < full.size(); ++n) {
    if (n == older_end && n > 0) continue;  // a whole record as older writers made it
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    ByteReader r(cut.data(), cut.size());
    Record rec;
    INFO("prefix of " << n << " of " << full.size() << " bytes");
    CHECK_FALSE(rec.decode(r));
  }
}

template <typename Record>
Record decode_all(const std::vector<uint8_t> &b) {
  ByteReader r(b.data(), b.size());
  Record out;
  REQUIRE(out.decode(r));
  CHECK(r.done());
  return out;
}

template <typename Record>
Record round_trip(const Record &in) {
  auto b = bytes_of(in);
  check_truncations<Record>(b);
  return decode_all<Record>(b);
}

}  // namespace

TEST_CASE("Process record round trips") {
  ProcessRecord p;
  p.info.pid = 1234567;
  p.info.rank = 3;
  p.info.hostname = "node-7";
  p.info.start_time = 1.7e9 + 0.25;
  p.info.backend = "cupti";
  p.info.python = "3.12.1";
  p.info.argv = {"python", "train.py", "--bad-\xff"};
  p.clock_base = 1.6e9 + 0.5;
  p.info.degraded = {"no line numbers: libdw unavailable"};
  p.info.unwinder = "frame pointers only";
  // Written before `degraded` and `unwinder` were appended: still read,
  // as a process that ran whole.
  ProcessRecord older = p;
  older.info.degraded.clear();
  older.info.unwinder.clear();
  auto older_bytes = bytes_of(older);
  older_bytes.resize(older_bytes.size() - 2);  // the empty list's count, the empty string's length
  ProcessRecord o = decode_all<ProcessRecord>(older_bytes);
  CHECK(o.info.hostname == "node-7");
  CHECK(o.info.degraded.empty());
  CHECK(o.clock_base == p.clock_base);
  auto b = bytes_of(p);
  check_truncations<ProcessRecord>(b, older_bytes.size());
  ProcessRecord q = decode_all<ProcessRecord>(b);
  CHECK(q.info.degraded == p.info.degraded);
  CHECK(q.info.unwinder == "frame pointers only");
  CHECK(q.info.pid == p.info.pid);
  CHECK(q.info.rank == 3);
  CHECK(q.info.hostname == "node-7");
  CHECK(q.info.start_time == p.info.start_time);
  CHECK(q.info.backend == "cupti");
  CHECK(q.info.python == "3.12.1");
  CHECK(q.info.argv == p.info.argv);
  CHECK(q.clock_base == p.clock_base);
}

TEST_CASE("Modules record round trips") {
  ModulesRecord m{{{"/usr/lib/libfoo.so", 0x7f00, 0x7f1000, 0x7f9000, "abcdef"}, {"", 0, 1, 2, ""}}};
  ModulesRecord q = round_trip(m);
  REQUIRE(q.modules.size() == 2);
  CHECK(q.modules[0].path == "/usr/lib/libfoo.so");
  CHECK(q.modules[0].base == 0x7f00);
  CHECK(q.modules[0].lo == 0x7f1000);
  CHECK(q.modules[0].hi == 0x7f9000);
  CHECK(q.modules[0].build_id == "abcdef");
}

TEST_CASE("Stacks record round trips, IPs going up and down") {
  StacksRecord s;
  s.stacks.push_back({1, {0x7fff00001000, 0x401000, ~0ull, 0}});
  s.stacks.push_back({65, {}});
  StacksRecord q = round_trip(s);
  REQUIRE(q.stacks.size() == 2);
  CHECK(q.stacks[0].first == 1);
  CHECK(q.stacks[0].second == s.stacks[0].second);
  CHECK(q.stacks[1].first == 65);
  CHECK(q.stacks[1].second.empty());
}

TEST_CASE("PyStacks record round trips strings and frame references") {
  PyStacksRecord p;
  p.strings = {{1, "forward"}, {2, "/app/model.py"}};
  p.stacks.push_back({7, {{1, 2, 42}, {1, 2, 0}}});
  PyStacksRecord q = round_trip(p);
  CHECK(q.strings == p.strings);
  REQUIRE(q.stacks.size() == 1);
  CHECK(q.stacks[0].first == 7);
  REQUIRE(q.stacks[0].second.size() == 2);
  CHECK(q.stacks[0].second[0].function == 1);
  CHECK(q.stacks[0].second[0].file == 2);
  CHECK(q.stacks[0].second[0].line == 42);
}

TEST_CASE("Events header, Pass, Labels and Symbols records round trip") {
  EventsHeader h = round_trip(EventsHeader{4242, 123456789, 300});
  CHECK(h.tid == 4242);
  CHECK(h.base_time == 123456789);
  CHECK(h.count == 300);
  CHECK(round_trip(PassRecord{987654321}).time_ns == 987654321);

  LabelsRecord l{{{1, "epoch 1"}, {2, ""}}};
  CHECK(round_trip(l).labels == l.labels);

  SymbolsRecord s;
  s.ips.push_back({0x401000, {{"inlined()", "a.h", 3, "/bin/x", 0}, {"outer()", "a.cpp", 9, "/bin/x", 0}}});
  s.ips.push_back({0x401010, {}});
  SymbolsRecord q = round_trip(s);
  REQUIRE(q.ips.size() == 2);
  REQUIRE(q.ips[0].second.size() == 2);
  CHECK(q.ips[0].second[1].function == "outer()");
  CHECK(q.ips[0].second[1].line == 9);
  CHECK(q.ips[0].second[1].address == 0x401000);  // set from the IP
}

TEST_CASE("End record: one shape, and the old flag-less crash shape still reads") {
  auto b = bytes_of(EndRecord{1.7e9 + 1.5, 1ull << 40, true, kEndTorchProcess});
  // Without its last byte it is the old shape (below), which must read.
  check_truncations<EndRecord>(std::vector<uint8_t>(b.begin(), b.end() - 2));
  EndRecord e = decode_all<EndRecord>(b);
  CHECK(e.end_time == 1.7e9 + 1.5);
  CHECK(e.events == 1ull << 40);
  CHECK(e.clean);
  CHECK(e.flags == kEndTorchProcess);

  // The raw-memory encoder (the crash path) writes the same bytes.
  EndRecord crash{1.7e9, 12, false, 0};
  uint8_t raw[EndRecord::kMaxBytes];
  size_t n = crash.encode(raw);
  CHECK(std::vector<uint8_t>(raw, raw + n) == bytes_of(crash));

  // Before the shapes were unified, a crash wrote no flags byte: f64 end
  // time 1.7e9, varint 12 events, u8 0 (not clean). Kept byte for byte.
  const uint8_t old_crash[] = {0x00, 0x00, 0x00, 0x40, 0xfc, 0x54, 0xd9, 0x41, 0x0c, 0x00};
  ByteReader r(old_crash, sizeof old_crash);
  EndRecord old;
  REQUIRE(old.decode(r));
  CHECK(old.end_time == 1.7e9);
  CHECK(old.events == 12);
  CHECK_FALSE(old.clean);
  CHECK(old.flags == 0);
}

TEST_CASE("corrupt counts fail to decode instead of allocating or overreading") {
  SECTION("a stack longer than any real one") {
    std::vector<uint8_t> b;
    ByteWriter w(b);
    w.varint(1);
    w.varint(1);
    w.varint(kMaxFrames + 1);
    StacksRecord s;
    ByteReader r(b.data(), b.size());
    CHECK_FALSE(s.decode(r));
  }
  SECTION("a huge string length") {
    std::vector<uint8_t> b;
    ByteWriter w(b);
    w.varint(1);
    w.varint(~0ull >> 1);
    ModulesRecord m;
    ByteReader r(b.data(), b.size());
    CHECK_FALSE(m.decode(r));
  }
  SECTION("a string id of 0 or past the bound") {
    for (uint64_t id : {uint64_t{0}, kMaxStringId + 1}) {
      std::vector<uint8_t> b;
      ByteWriter w(b);
      w.varint(1);
      w.varint(id);
      w.str("x");
      LabelsRecord l;
      ByteReader r(b.data(), b.size());
      CHECK_FALSE(l.decode(r));
      PyStacksRecord p;
      ByteReader r2(b.data(), b.size());
      CHECK_FALSE(p.decode(r2));
    }
  }
  SECTION("too many inlined levels for one IP") {
    std::vector<uint8_t> b;
    ByteWriter w(b);
    w.varint(1);
    w.varint(0x401000);
    w.varint(kMaxSymbolFrames + 1);
    SymbolsRecord s;
    ByteReader r(b.data(), b.size());
    CHECK_FALSE(s.decode(r));
  }
}

namespace {

// A Verdict ends with memory by role (trailing fields): the prefix that
// stops where older writers stopped is a whole record, and must read.
VerdictRecord verdict_round_trip(const VerdictRecord &v) {
  VerdictRecord bare = v;
  bare.roles_now = bare.roles_peak = RoleSnapshot{};
  bare.role_steps.clear();
  for (auto &o : bare.ooms) o.roles = RoleSnapshot{};
  auto b = bytes_of(v);
  check_truncations<VerdictRecord>(b, bytes_of(bare).size() - 1);  // less its `varint 0`
  return decode_all<VerdictRecord>(b);
}

VerdictRecord sample_verdict() {
  VerdictRecord v;
  v.scan.done = true;
  v.scan.at_exit = true;
  v.scan.partial = false;
  v.scan.chains = {{"global 'model' (Linear) in train.py", ".weight", "Tensor float32 (8, 8)"},
                   {}};
  v.scan.storages = {{0x7f0000000000, 256, 0}, {0x7f0000001000, 1ull << 40, 1}};
  SiteHolders s;
  s.stack = 65;
  s.pystack = 3;
  s.api = ApiId::cudaMalloc;
  s.family = Family::Device;
  s.holders = {{{"main() local 'kept' (list) at a.py:3", "[0..7]"}, 4096, 8}};
  v.site_holders = {s};
  v.ooms.push_back({123456789012, 4242, true, {}, {}});
  v.ooms.push_back({123456789999, 7, false, {{{"global 'x'"}, 1, 1}}, {}});
  return v;
}

}  // namespace

TEST_CASE("Verdict record round trips the scan, site holders and OOM verdicts") {
  VerdictRecord v = sample_verdict();
  VerdictRecord q = verdict_round_trip(v);
  CHECK(q.scan.done);
  CHECK(q.scan.at_exit);
  CHECK_FALSE(q.scan.partial);
  CHECK(q.scan.chains == v.scan.chains);
  REQUIRE(q.scan.storages.size() == 2);
  CHECK(q.scan.storages[1].addr == 0x7f0000001000);
  CHECK(q.scan.storages[1].bytes == 1ull << 40);
  CHECK(q.scan.storages[1].chain == 1);
  REQUIRE(q.site_holders.size() == 1);
  CHECK(q.site_holders[0].stack == 65);
  CHECK(q.site_holders[0].pystack == 3);
  CHECK(q.site_holders[0].api == ApiId::cudaMalloc);
  CHECK(q.site_holders[0].family == Family::Device);
  REQUIRE(q.site_holders[0].holders.size() == 1);
  CHECK(q.site_holders[0].holders[0].chain == v.site_holders[0].holders[0].chain);
  CHECK(q.site_holders[0].holders[0].bytes == 4096);
  CHECK(q.site_holders[0].holders[0].tensors == 8);
  REQUIRE(q.ooms.size() == 2);
  CHECK(q.ooms[0].time_ns == 123456789012);
  CHECK(q.ooms[0].tid == 4242);
  CHECK(q.ooms[0].recovered);
  CHECK(q.ooms[0].holders.empty());
  CHECK_FALSE(q.ooms[1].recovered);
  REQUIRE(q.ooms[1].holders.size() == 1);
  CHECK(q.ooms[1].holders[0].chain == std::vector<std::string>{"global 'x'"});

  // A partial step scan (flags other than at_exit) keeps its flags too.
  VerdictRecord step;
  step.scan.done = true;
  step.scan.partial = true;
  VerdictRecord p = verdict_round_trip(step);
  CHECK(p.scan.done);
  CHECK_FALSE(p.scan.at_exit);
  CHECK(p.scan.partial);
}

TEST_CASE("Verdict record round trips memory by role, and reads without it") {
  VerdictRecord v = sample_verdict();
  RoleSnapshot snap;
  snap.taken = true;
  snap.at = "step";
  snap.step = 4;
  snap.time_ns = 99;
  snap.live_bytes = 1 << 20;
  snap.allocator_stats = true;
  snap.torch_allocated = 1000;
  snap.torch_reserved = 2000;
  snap.sites.push_back({65, 3, ApiId::cudaMalloc, Family::Device, 1 << 20, 2, 4096});
  snap.found.push_back({MemoryRole::Gradients, "GPT", 4096, 1});
  snap.user_holders = {{{"global 'x'"}, 1, 1}};
  v.roles_now = snap;
  v.role_steps = {snap, snap};
  v.ooms[1].roles = snap;
  VerdictRecord q = verdict_round_trip(v);
  CHECK(q.roles_now.taken);
  CHECK_FALSE(q.roles_peak.taken);
  CHECK(q.role_steps.size() == 2);
  CHECK_FALSE(q.ooms[0].roles.taken);
  REQUIRE(q.ooms[1].roles.taken);
  const RoleSnapshot &r = q.ooms[1].roles;
  CHECK(r.at == "step");
  CHECK(r.step == 4);
  CHECK(r.live_bytes == 1u << 20);
  CHECK(r.torch_allocated == 1000);
  REQUIRE(r.sites.size() == 1);
  CHECK(r.sites[0].found_bytes == 4096);
  REQUIRE(r.found.size() == 1);
  CHECK(r.found[0].role == MemoryRole::Gradients);
  CHECK(r.found[0].module == "GPT");
  CHECK(r.user_holders.size() == 1);
  // A file written before memory by role: its Verdict ends after the OOMs.
  VerdictRecord old = verdict_round_trip(sample_verdict());
  CHECK_FALSE(old.roles_now.taken);
  CHECK(old.ooms.size() == 2);
}

TEST_CASE("a damaged Verdict payload fails to decode instead of allocating or misindexing") {
  // The counts, each past its bound, in payload order after the flags byte.
  auto with = [](std::initializer_list<uint64_t> varints, uint8_t flags = 3) {
    std::vector<uint8_t> b;
    ByteWriter w(b);
    w.u8(flags);
    for (uint64_t v : varints) w.varint(v);
    return b;
  };
  auto fails = [](const std::vector<uint8_t> &b) {
    ByteReader r(b.data(), b.size());
    VerdictRecord v;
    return !v.decode(r);
  };
  SECTION("too many chains or storages") {
    CHECK(fails(with({kMaxScanItems + 1})));
    CHECK(fails(with({0, kMaxScanItems + 1})));
  }
  SECTION("a chain longer than the bound") { CHECK(fails(with({1, kMaxChainSteps + 1}))); }
  SECTION("a storage naming a chain that does not exist") {
    CHECK(fails(with({1, 0, 1, 0x1000, 16, 1, 0, 0})));
    CHECK_FALSE(fails(with({1, 0, 1, 0x1000, 16, 0, 0, 0})));
  }
  SECTION("too many sites, OOMs or holders") {
    CHECK(fails(with({0, 0, kMaxVerdictSites + 1})));
    CHECK(fails(with({0, 0, 0, kMaxVerdictSites + 1})));
    std::vector<uint8_t> b = with({0, 0, 1, 1, 1, 0});
    b.push_back(0);  // family Device
    ByteWriter(b).varint(kMaxHolders + 1);
    CHECK(fails(b));
  }
  SECTION("a site's api, family or stack id out of range") {
    const std::tuple<uint64_t, uint8_t, uint64_t> cases[] = {
        {0x10000, 0, 1}, {0, static_cast<uint8_t>(static_cast<int>(kLastFamily) + 1), 1}, {0, 0, 1ull << 32}};
    for (auto [api, family, stack] : cases) {
      std::vector<uint8_t> b = with({0, 0, 1, stack, 1, api});
      b.push_back(family);
      ByteWriter(b).varint(0);
      ByteWriter(b).varint(0);  // no OOMs
      CHECK(fails(b));
    }
  }
  SECTION("every byte flipped decodes or fails, never overreads") {
    std::vector<uint8_t> good = bytes_of(sample_verdict());
    for (size_t i = 0; i < good.size(); ++i) {
      std::vector<uint8_t> b = good;
      b[i] ^= 0xff;
      ByteReader r(b.data(), b.size());
      VerdictRecord v;
      if (v.decode(r))
        for (const HeldStorage &s : v.scan.storages) CHECK(s.chain < v.scan.chains.size());
    }
  }
}
