// Every chunk record: encode/decode round trip, and a clear failure (false,
// never a read past the payload) on every truncation and on corrupt counts.
#include <catch2/catch.hpp>

#include <cstring>

#include "report/format/records.h"

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
void check_truncations(const std::vector<uint8_t> &full) {
  for (size_t n = 0; n < full.size(); ++n) {
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
  ProcessRecord q = round_trip(p);
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
