// The unwinder's rule table (shim/core/unwind/frame_rules.h): what the walker's
// one-load probe and find() answer, collisions, retirement.
#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "shim/core/unwind/frame_rules.h"

using namespace torchseal::unwind;

namespace {
constexpr uint64_t kStep = FrameRule{RuleKind::Step, false, 40, 0}.pack();
constexpr uint64_t kEnd = FrameRule{RuleKind::End, false, 0, 0}.pack();

// What the walker concludes from the home slot alone (unwinder.cpp).
enum class Probe { FramePointer, OwnRule, Unsettled };
Probe probe(RuleTable::Table t, uint64_t ip) {
  uint64_t key = RuleTable::key_at(t, RuleTable::index(ip)) ^ ip;
  if (key == ~uint64_t{0}) return Probe::FramePointer;
  if (key == 0) return Probe::OwnRule;
  return Probe::Unsettled;
}
}  // namespace

TEST_CASE("rule table: frame-pointer rules live in the key, others beside it") {
  RuleTable rules;
  REQUIRE(rules.reserve());
  const uint64_t fp_ip = 0x7f0000401234, step_ip = 0x7f0000405678, end_ip = 0x401000;
  CHECK(rules.find(fp_ip) == 0);
  CHECK(rules.insert(fp_ip, kPackedFramePointer));
  CHECK(rules.insert(step_ip, kStep));
  CHECK(rules.insert(end_ip, kEnd));
  CHECK(rules.find(fp_ip) == kPackedFramePointer);
  CHECK(rules.find(step_ip) == kStep);
  CHECK(rules.find(end_ip) == kEnd);

  RuleTable::Table t = rules.table();
  CHECK(probe(t, fp_ip) == Probe::FramePointer);
  CHECK(probe(t, step_ip) == Probe::OwnRule);
  CHECK(RuleTable::rule_at(t, RuleTable::index(step_ip)) == kStep);
  // A second insert of a known address keeps the first rule.
  CHECK(rules.insert(fp_ip, kStep));
  CHECK(rules.find(fp_ip) == kPackedFramePointer);
  // Not user-space addresses, and empty rules, are refused.
  CHECK_FALSE(rules.insert(~fp_ip, kStep));
  CHECK_FALSE(rules.insert(0, kStep));
  CHECK_FALSE(rules.insert(0x1234, 0));
}

TEST_CASE("rule table: colliding addresses probe on, and the home probe never lies") {
  RuleTable rules;
  REQUIRE(rules.reserve());
  // Addresses sharing one home slot: the first owns it, the others sit
  // further on and are found by find(), while the walker's home probe sends
  // them to the slow path instead of misreading the owner's key.
  std::vector<uint64_t> same_home;
  uint64_t home = RuleTable::index(0x7f1000000000);
  for (uint64_t ip = 0x7f1000000000; same_home.size() < 6; ip += 1)
    if (RuleTable::index(ip) == home) same_home.push_back(ip);
  for (size_t i = 0; i < same_home.size(); ++i)
    REQUIRE(rules.insert(same_home[i], i % 2 ? kStep : kPackedFramePointer));
  RuleTable::Table t = rules.table();
  CHECK(probe(t, same_home[0]) == Probe::FramePointer);
  for (size_t i = 1; i < same_home.size(); ++i) {
    CHECK(probe(t, same_home[i]) == Probe::Unsettled);
    CHECK(rules.find(same_home[i]) == (i % 2 ? kStep : kPackedFramePointer));
  }
}

TEST_CASE("rule table: many rules against a reference map, and retirement") {
  RuleTable rules;
  REQUIRE(rules.reserve());
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t ip = 0x400000 + rng() % (uint64_t{1} << 40);
    uint64_t rule = rng() % 3 == 0 ? kStep : kPackedFramePointer;
    if (rules.insert(ip, rule)) ref.emplace(ip, rule);
  }
  CHECK(ref.size() > 19000);
  for (const auto &[ip, rule] : ref) REQUIRE(rules.find(ip) == rule);
  // Retired: everything reads as unknown, and the new table learns afresh.
  REQUIRE(rules.clear());
  for (const auto &[ip, rule] : ref) REQUIRE(rules.find(ip) == 0);
  REQUIRE(rules.insert(ref.begin()->first, kStep));
  CHECK(rules.find(ref.begin()->first) == kStep);
}

TEST_CASE("rule table: readers racing inserts see a rule or nothing, never another's") {
  RuleTable rules;
  REQUIRE(rules.reserve());
  std::vector<uint64_t> ips;
  for (uint64_t i = 0; i < 4000; ++i) ips.push_back(0x7f2000000000 + i * 24);
  auto rule_for = [](uint64_t ip) {
    return (ip / 24) % 2 ? kPackedFramePointer
                         : FrameRule{RuleKind::Step, false, static_cast<int32_t>(ip % 4096), 0}.pack();
  };
  std::atomic<bool> done{false};
  std::atomic<uint64_t> wrong{0};
  std::thread reader([&] {
    while (!done.load())
      for (uint64_t ip : ips) {
        uint64_t v = rules.find(ip);
        if (v && v != rule_for(ip)) wrong.fetch_add(1);
      }
  });
  for (uint64_t ip : ips) rules.insert(ip, rule_for(ip));
  done.store(true);
  reader.join();
  CHECK(wrong.load() == 0);
}
