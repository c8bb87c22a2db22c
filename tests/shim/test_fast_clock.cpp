// The shim's event clock (shim/core/fast_clock.h) against CLOCK_MONOTONIC.
#include <time.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <thread>
#include <vector>

#include "shim/core/fast_clock.h"

namespace {
uint64_t mono() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
int64_t gap(uint64_t a, uint64_t b) { return static_cast<int64_t>(a - b); }
}  // namespace

TEST_CASE("the event clock follows CLOCK_MONOTONIC and never steps back in a thread") {
  using torchseal::now_ns;
  // Through calibration (10 ms) and three re-anchors (every 250 ms).
  uint64_t end = mono() + 900'000'000ull;
  uint64_t prev = now_ns();
  int64_t worst = 0;
  uint64_t calls = 0;
  while (mono() < end) {
    uint64_t before = mono();
    uint64_t t = now_ns();
    uint64_t after = mono();
    ++calls;
    REQUIRE(t >= prev);
    prev = t;
    // Within the bracketing reads, up to the slack the re-anchoring allows.
    int64_t off = t < before ? gap(before, t) : (t > after ? gap(t, after) : 0);
    if (off > worst) worst = off;
  }
  INFO("calls " << calls << ", worst distance from CLOCK_MONOTONIC " << worst << " ns, TSC "
                << torchseal::clock_uses_tsc());
  CHECK(worst < 200'000);  // 0.2 ms
  WARN("event clock: " << (torchseal::clock_uses_tsc() ? "TSC" : "clock_gettime")
                       << ", worst distance from CLOCK_MONOTONIC " << worst << " ns");
}

TEST_CASE("threads read one clock") {
  std::vector<std::thread> ts;
  std::vector<int64_t> worst(4, 0);
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([i, &worst] {
      uint64_t prev = 0;
      for (int k = 0; k < 200000; ++k) {
        uint64_t before = mono();
        uint64_t t = torchseal::now_ns();
        uint64_t after = mono();
        if (t < prev) worst[i] = INT64_MAX;  // stepped back
        prev = t;
        int64_t off = t < before ? gap(before, t) : (t > after ? gap(t, after) : 0);
        if (off > worst[i]) worst[i] = off;
      }
    });
  for (auto &t : ts) t.join();
  for (int64_t w : worst) CHECK(w < 200'000);
}
