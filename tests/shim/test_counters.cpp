// The shim's event and live-byte counters (shim/core/counters.h) under threads
// that come and go: stripes are handed from exited threads to new ones with
// plain stores, so a lost update would show as a wrong total here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
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

// The shape of the cuda-samples run whose peak read 2^64 - 400000: the main
// thread allocates, eight stream-callback workers free what it allocated.
// The workers' frees must reach the global count before the main thread's
// next peak check, or that check counts freed bytes as live.
TEST_CASE("the peak is exact when one thread allocates and eight others free") {
  counters().reset();
  constexpr int kWorkers = 8, kRounds = 300;
  constexpr int64_t kBuffer = 400000;
  uint64_t live = 0, peak = 0;
  for (int round = 0; round < kRounds; ++round) {
    int in_flight = 1 + round % kWorkers;  // 400 KB .. 3.2 MB live at once
    for (int i = 0; i < in_flight; ++i) {
      counters().add_live(kBuffer);
      live += kBuffer;
      peak = std::max(peak, live);
    }
    std::vector<std::thread> workers;
    for (int w = 0; w < in_flight; ++w) workers.emplace_back([] { counters().add_live(-kBuffer); });
    for (auto &t : workers) t.join();
    live -= static_cast<uint64_t>(in_flight) * kBuffer;
    CHECK(counters().live_bytes() == live);
  }
  CHECK(counters().peak_bytes() == peak);
}

TEST_CASE("frees on long-lived workers never make the peak wrap or overshoot") {
  counters().reset();
  constexpr int kWorkers = 8;
  constexpr int64_t kBuffer = 400000;
  // Workers that live across rounds keep their stripes: a free that stayed
  // in one as a negative share left the global count short by it.
  std::atomic<int> turn{-1};
  std::atomic<int> done{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w)
    workers.emplace_back([&, w] {
      for (int round = 0; round < 50; ++round) {
        while (turn.load() != round * kWorkers + w) std::this_thread::yield();
        counters().add_live(-kBuffer);
        done.fetch_add(1);
      }
    });
  for (int round = 0; round < 50; ++round)
    for (int w = 0; w < kWorkers; ++w) {
      counters().add_live(kBuffer);
      int ticket = round * kWorkers + w;
      turn.store(ticket);
      while (done.load() != ticket + 1) std::this_thread::yield();
    }
  for (auto &t : workers) t.join();
  CHECK(counters().live_bytes() == 0);
  CHECK(counters().peak_bytes() == uint64_t{kBuffer});
}

// The shape of simpleCallback-like programs: worker threads allocate (each
// share stays under the fold threshold) and another thread frees it all.
// The freer's share reached the global count while the allocators' did
// not, so the global count alone went below zero, and the next allocating
// thread's check read 2^64 - 800000 as the peak.
TEST_CASE("frees folded before others' allocations never make the peak wrap") {
  counters().reset();
  constexpr int64_t kShare = 300000, kLate = 400000;
  // Threads that stay alive until the end: an exiting thread folds its share.
  std::mutex m;
  std::condition_variable cv;
  int step = 0;
  auto at = [&](int my_step, auto fn) {
    return std::thread([&, my_step, fn] {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return step == my_step; });
      fn();
      ++step;
      cv.notify_all();
      cv.wait(lock, [&] { return step == 100; });  // stay alive until the end
    });
  };
  std::vector<std::thread> team;
  for (int i = 0; i < 4; ++i) team.push_back(at(i, [] { counters().add_live(kShare); }));
  team.push_back(at(4, [] {
    for (int i = 0; i < 4; ++i) counters().add_live(-kShare);
  }));
  team.push_back(at(5, [] { counters().add_live(kLate); }));
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return step == 6; });
    CHECK(counters().live_bytes() == uint64_t{kLate});
    CHECK(counters().peak_bytes() > 0);
    CHECK(counters().peak_bytes() <= uint64_t{4 * kShare});
    step = 100;
    cv.notify_all();
  }
  for (auto &t : team) t.join();
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
