// The shim's event and live-byte counters (shim/core/counters.h) under threads
// that come and go: stripes are handed from exited threads to new ones with
// plain stores, so a lost update would show as a wrong total here.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "shim/core/counters.h"

using torchseal::counters;

TEST_CASE("counters stay exact across hundreds of short-lived threads") {
  counters().reset();
  constexpr int kWaves = 40, kPerWave = 8, kEvents = 2000;
  std::atomic<int64_t> expected_live{0};
  for (int wave = 0; wave < kWaves; ++wave) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kPerWave; ++t)
      threads.emplace_back([&, t] {
        int64_t mine = 0;
        for (int i = 0; i < kEvents; ++i) {
          uint64_t t0 = torchseal::now_ns();
          // Net growth per thread well under the fold threshold for some
          // threads, over it for others: both paths to the global count.
          int64_t d = (i % 2 == 0) ? 512 * (t + 1) : -256 * (t + 1);
          counters().add_live(d);
          mine += d;
          counters().end_event(t0);
        }
        expected_live.fetch_add(mine);
      });
    for (auto &th : threads) th.join();
  }
  // 320 threads ran, far more than the 63 owned stripes: every event counted
  // once, and every thread's share of live bytes folded in at its exit.
  CHECK(counters().events() == uint64_t{kWaves} * kPerWave * kEvents);
  CHECK(counters().live_bytes() == static_cast<uint64_t>(expected_live.load()));
  CHECK(counters().peak_bytes() >= counters().live_bytes() / kWaves);
}

TEST_CASE("live bytes and the peak are exact with one allocating thread") {
  counters().reset();
  uint64_t live = 0, peak = 0;
  for (int i = 0; i < 10000; ++i) {
    int64_t d = (i % 3 == 2) ? -4096 : 3000;  // crosses the 1 MiB fold many times
    counters().add_live(d);
    live += static_cast<uint64_t>(d);
    if (live > peak) peak = live;
  }
  CHECK(counters().live_bytes() == live);
  CHECK(counters().peak_bytes() == peak);
}

TEST_CASE("a window's peak starts at the live bytes; the process's peak stays") {
  counters().reset();
  counters().add_live(5000);
  counters().add_live(-4000);  // the process's peak: 5000, live 1000
  CHECK(counters().window_peak(true) == 5000);
  CHECK(counters().window_peak(false) == 1000);
  counters().add_live(300);
  counters().add_live(-200);
  CHECK(counters().window_peak(true) == 1300);
  CHECK(counters().window_peak(false) == 1100);
  CHECK(counters().peak_bytes() == 5000);
  counters().add_live(7000);
  CHECK(counters().peak_bytes() == 8100);
  CHECK(counters().window_peak(false) == 8100);
}

namespace {
std::vector<int64_t> g_seen;
bool watch_until_alloc(int64_t delta) {
  g_seen.push_back(delta);
  return delta > 0;
}
}  // namespace

TEST_CASE("a watched thread's updates reach the watch until it says stop, and still count") {
  counters().reset();
  g_seen.clear();
  std::thread([] {
    uint64_t t0 = torchseal::now_ns();
    counters().add_live(100);
    counters().end_event(t0);
    counters().watch_thread(&watch_until_alloc);
    counters().add_live(-40);  // seen, watch goes on
    counters().end_event(t0);  // seen as 0
    counters().add_live(7);    // seen, watch ends
    counters().add_live(5);    // not seen
    counters().end_event(t0);
  }).join();
  CHECK(g_seen == std::vector<int64_t>{-40, 0, 7});
  CHECK(counters().events() == 3);
  CHECK(counters().live_bytes() == 72);
}
