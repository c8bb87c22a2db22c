#include <catch2/catch.hpp>

#include <random>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "shim/core/live_table.h"
#include "shim/core/stack_table.h"

using namespace torchseal;

TEST_CASE("live table insert, find, remove against a reference map") {
  LiveTable t;
  std::unordered_map<uint64_t, uint64_t> ref;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    uint64_t addr = (rng() % 5000 + 1) * 256;
    if (rng() % 3 == 0) {
      LiveRecord out{};
      bool removed = t.remove(addr, &out);
      CHECK(removed == (ref.count(addr) == 1));
      if (removed) CHECK(out.size == ref[addr]);
      ref.erase(addr);
    } else {
      LiveRecord r{};
      r.addr = addr;
      r.size = rng() % 1000 + 1;
      t.insert(r, nullptr);
      ref[addr] = r.size;
    }
  }
  CHECK(t.size() == ref.size());
  size_t seen = 0;
  t.for_each([&](const LiveRecord &r) {
    ++seen;
    CHECK(ref.at(r.addr) == r.size);
  });
  CHECK(seen == ref.size());
}

TEST_CASE("live table remove_if moves matching records out") {
  LiveTable t;
  for (uint64_t i = 1; i <= 1000; ++i) {
    LiveRecord r{};
    r.addr = i * 4096;
    r.size = 1;
    r.device = static_cast<int8_t>(i % 2);
    t.insert(r, nullptr);
  }
  size_t moved = 0;
  t.remove_if([](const LiveRecord &r) { return r.device == 1; }, [&](const LiveRecord &) { ++moved; });
  CHECK(moved == 500);
  CHECK(t.size() == 500);
  for (uint64_t i = 2; i <= 1000; i += 2) CHECK(t.find(i * 4096, nullptr));
}

TEST_CASE("live table is consistent under 8 threads with cross-thread frees") {
  LiveTable t;
  std::vector<std::thread> th;
  for (int k = 0; k < 8; ++k)
    th.emplace_back([&, k] {
      for (uint64_t i = 0; i < 20000; ++i) {
        LiveRecord r{};
        r.addr = (static_cast<uint64_t>(k) << 40) | ((i + 1) * 512);
        r.size = 1;
        t.insert(r, nullptr);
        // free one inserted by the neighbour thread (may or may not be there)
        uint64_t other = (static_cast<uint64_t>((k + 1) % 8) << 40) | ((i + 1) * 512);
        t.remove(other, nullptr);
      }
    });
  for (auto &x : th) x.join();
  size_t n = t.size();
  CHECK(n <= 8 * 20000);
  size_t seen = 0;
  t.for_each([&](const LiveRecord &) { ++seen; });
  CHECK(seen == n);
}

TEST_CASE("stack table interns equal stacks to one id") {
  StackTable st;
  uint64_t a[] = {1, 2, 3}, b[] = {1, 2, 4}, c[] = {1, 2};
  StackId ia = st.intern(a, 3), ib = st.intern(b, 3), ic = st.intern(c, 2);
  CHECK(ia != 0);
  CHECK(ia != ib);
  CHECK(ia != ic);
  CHECK(st.intern(a, 3) == ia);
  CHECK(st.intern(nullptr, 0) == 0);
  std::vector<std::vector<uint64_t>> all;
  st.export_all(all);
  REQUIRE(all.size() > std::max({ia, ib, ic}));
  CHECK(all[ia] == std::vector<uint64_t>{1, 2, 3});
  CHECK(all[ic] == std::vector<uint64_t>{1, 2});
}

TEST_CASE("stack table from many threads gives unique ids per distinct stack") {
  StackTable st;
  std::vector<std::thread> th;
  std::vector<std::vector<StackId>> ids(4);
  for (int k = 0; k < 4; ++k)
    th.emplace_back([&, k] {
      for (uint64_t i = 0; i < 5000; ++i) {
        uint64_t s[] = {i, i * 7, 99};
        ids[k].push_back(st.intern(s, 3));
      }
    });
  for (auto &x : th) x.join();
  for (int k = 1; k < 4; ++k) CHECK(ids[k] == ids[0]);
  CHECK(std::set<StackId>(ids[0].begin(), ids[0].end()).size() == 5000);
  CHECK(st.count() == 5000);
}
