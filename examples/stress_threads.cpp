// stress_threads: 8 threads each make N cudaMalloc/cudaFree pairs (N from
// STRESS_PAIRS, default 250000: the full figure; CI uses fewer). One pair in
// ten is handed to the next thread and freed there (cross-thread free). A
// ninth thread sends the process SIGUSR1 every 10 ms while the workers run,
// so the writer thread writes P.<n>.json dumps under full load.
//
// SIGUSR1 is only sent when torchseal is active (its C API answers), because
// without a handler the signal's default action would kill the program.
// Prints `calls=N` (allocation + free calls) and `signals=N`.
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace {
constexpr int kThreads = 8;

struct Mailbox {
  std::mutex m;
  std::vector<void *> ptrs;
};

Mailbox boxes[kThreads];
std::atomic<int> running{kThreads};

void drain(int id) {
  std::vector<void *> mine;
  {
    std::lock_guard<std::mutex> lock(boxes[id].m);
    mine.swap(boxes[id].ptrs);
  }
  for (void *p : mine) CHECK(cudaFree(p));
}

void worker(int id, long pairs) {
  for (long i = 0; i < pairs; ++i) {
    void *p = nullptr;
    CHECK(cudaMalloc(&p, 256 * static_cast<size_t>(1 + (i + id) % 32)));
    if (i % 10 == 3) {
      // Freed by the next thread.
      std::lock_guard<std::mutex> lock(boxes[(id + 1) % kThreads].m);
      boxes[(id + 1) % kThreads].ptrs.push_back(p);
    } else {
      CHECK(cudaFree(p));
    }
    if (i % 64 == 0) drain(id);
  }
  running.fetch_sub(1);
  // Keep draining until every worker is done, so nothing is left behind.
  while (running.load() > 0) {
    drain(id);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  drain(id);
}
}  // namespace

int main() {
  long pairs = 250000;
  if (const char *s = std::getenv("STRESS_PAIRS")) pairs = std::atol(s);
  // First CUDA call: torchseal (if preloaded) initialises and installs its
  // SIGUSR1 handler here.
  void *warm = nullptr;
  CHECK(cudaMalloc(&warm, 64));
  CHECK(cudaFree(warm));
  using active_fn = int (*)();
  auto active = reinterpret_cast<active_fn>(dlsym(RTLD_DEFAULT, "torchseal_active"));
  bool signal_ok = active && active();

  std::atomic<bool> stop{false};
  std::atomic<long> signals{0};
  std::thread signaller([&] {
    while (!stop.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (signal_ok && !stop.load()) {
        kill(getpid(), SIGUSR1);
        signals.fetch_add(1);
      }
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t, pairs);
  for (auto &t : threads) t.join();
  stop.store(true);
  signaller.join();
  for (int t = 0; t < kThreads; ++t) drain(t);
  std::printf("stress_threads: %d threads x %ld pairs\n", kThreads, pairs);
  std::printf("signals=%ld\n", signals.load());
  example::print_calls();
  std::fflush(stdout);
  return 0;
}
