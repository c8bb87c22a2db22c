// The shim's event clock (shim/core/fast_clock.h) against CLOCK_MONOTONIC.
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
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

// Each thread stamps from its own copy of the line: a copy made before
// re-anchors it slept through must not be used past its window.
TEST_CASE("a thread asleep across re-anchors stamps on the current line") {
  std::thread([] {
    using torchseal::clock_detail::thread_line;
    // Past calibration (10 ms), so that this thread holds a copy.
    uint64_t first = torchseal::now_ns();
    for (uint64_t end = mono() + 100'000'000; !thread_line().window && mono() < end;)
      first = torchseal::now_ns();
    const auto old = thread_line();
    // What a stamp interrupted by a signal handler would still be reading.
    const auto &in_use = thread_line();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // two re-anchors
    uint64_t before = mono();
    uint64_t t = torchseal::now_ns();
    uint64_t after = mono();
    CHECK(t > first);
    CHECK(gap(before, t) < 200'000);
    CHECK(gap(t, after) < 200'000);
    if (torchseal::clock_uses_tsc()) {
      // The old copy's window had passed: the stamp came from a copy made
      // now, of a line anchored past the old one's window.
      CHECK(old.window != 0);
      const auto &now = thread_line();
      CHECK(now.anchor_tsc > old.anchor_tsc + old.window);
      CHECK(__rdtsc() - now.anchor_tsc <= now.window);
      // The new copy went elsewhere: the words a stamp was reading stay one
      // line's (a copy rewritten in place let such a stamp mix two lines).
      CHECK(&now != &in_use);
      CHECK(std::memcmp(&in_use, &old, sizeof old) == 0);
    }
  }).join();
}

namespace {
std::atomic<int64_t> g_handler_worst{0};
std::atomic<uint64_t> g_handler_stamps{0};
void stamp_in_handler(int) {
  uint64_t before = mono();
  uint64_t t = torchseal::now_ns();
  uint64_t after = mono();
  int64_t off = t < before ? gap(before, t) : (t > after ? gap(t, after) : 0);
  if (off > g_handler_worst.load()) g_handler_worst.store(off);
  g_handler_stamps.fetch_add(1);
}
}  // namespace

// A signal handler's stamp may land inside the interrupted thread's own
// stamp, while it copies the line: both must stay on the line.
TEST_CASE("stamps from a signal handler interrupting stamps") {
  struct sigaction sa{}, old{};
  sa.sa_handler = stamp_in_handler;
  sigemptyset(&sa.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
  pthread_t self = pthread_self();
  std::atomic<bool> done{false};
  std::thread kicker([&] {
    while (!done.load()) {
      pthread_kill(self, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  });
  uint64_t end = mono() + 600'000'000ull;  // across two re-anchors
  uint64_t prev = 0;
  int64_t worst = 0;
  while (mono() < end) {
    uint64_t before = mono();
    uint64_t t = torchseal::now_ns();
    uint64_t after = mono();
    REQUIRE(t >= prev);
    prev = t;
    int64_t off = t < before ? gap(before, t) : (t > after ? gap(t, after) : 0);
    if (off > worst) worst = off;
  }
  done.store(true);
  kicker.join();
  sigaction(SIGUSR1, &old, nullptr);
  INFO("handler stamps " << g_handler_stamps.load());
  CHECK(g_handler_stamps.load() > 100);
  CHECK(worst < 200'000);
  CHECK(g_handler_worst.load() < 200'000);
}

// Forked while another thread of the parent re-anchored the line (its flag
// set, its publish half done): the child's clock re-anchors all the same.
TEST_CASE("a child forked in the middle of a re-anchor re-anchors its line") {
  using namespace torchseal::clock_detail;
  for (uint64_t end = mono() + 100'000'000; !torchseal::clock_uses_tsc() && mono() < end;)
    torchseal::now_ns();
  if (!torchseal::clock_uses_tsc()) {
    WARN("the clock does not read the TSC here: nothing to re-anchor");
    return;
  }
  const uint32_t seq = g_line.seq.load();
  g_updating.store(true);
  g_line.seq.store(seq + 1);  // a publish under way
  pid_t pid = fork();
  if (pid == 0) {
    after_fork_child();  // what the shim's atfork child handler runs
    int code = 0;
    uint32_t s0 = g_line.seq.load();
    if (s0 & 1) code |= 1;
    usleep(300'000);  // past the line's window: the next stamp re-anchors
    uint64_t before = mono();
    uint64_t t = torchseal::now_ns();
    uint64_t after = mono();
    if (g_line.seq.load() == s0) code |= 2;
    if (gap(before, t) > 200'000 || gap(t, after) > 200'000) code |= 4;
    _exit(code);
  }
  g_line.seq.store(seq);
  g_updating.store(false);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 1: half-published line, 2: never re-anchored, 4: off
}
