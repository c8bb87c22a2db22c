// The history's per-thread buffers (shim/core/thread_buffers.h) under threads
// that exit while the writer cuts passes: every event a thread appended,
// up to its last free before it exits, is in exactly one sealed chunk.
// A cut once forgot a buffer whose thread exited between its seal and the
// cut's end, with the events appended in between (a CI run lost a thread's
// last 1,600 frees that way).
#include <catch2/catch.hpp>

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <thread>
#include <vector>

#include "shim/core/thread_buffers.h"

namespace buffers = torchseal::history::buffers;

namespace {

torchseal::Event free_event(uint64_t i) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  torchseal::Event e{};
  e.time_ns = uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
  e.addr = 0x7f0000000000 + i * 512;
  e.size = 512;
  e.op = torchseal::Op::Free;
  e.device = 0;
  return e;
}

uint64_t count(std::vector<buffers::Sealed> &&chunks) {
  uint64_t n = 0;
  for (const buffers::Sealed &c : chunks) n += c.count;
  buffers::recycle(std::move(chunks));
  return n;
}

// A thread-key destructor made before the shim's runs after it: a library's
// thread-exit cleanup that frees memory once the shim's has run.
pthread_key_t g_late_key;
void late_free(void *) { torchseal::history::append(free_event(0)); }

}  // namespace

TEST_CASE("no event is lost from a thread that exits while the writer cuts") {
  buffers::init();
  buffers::set_accepting(true);
  // The shim's key is made at a thread's first append; the late one after.
  torchseal::history::append(free_event(0));
  uint64_t appended = 1;
  REQUIRE(pthread_key_create(&g_late_key, late_free) == 0);

  // Waves of short-lived threads, each ending with a burst of appends, as
  // a worker's last frees before it returns, while the writer cuts
  // without pause: many exits land inside a cut.
  constexpr int kWaves = 60, kPerWave = 6, kEvents = 300;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> sealed{0};
  std::thread writer([&] {
    buffers::set_writer_thread();
    while (!stop.load()) sealed.fetch_add(count(buffers::cut()));
  });
  for (int wave = 0; wave < kWaves; ++wave) {
    std::vector<std::thread> threads;
    for (int t = 0; t < kPerWave; ++t)
      threads.emplace_back([t, wave] {
        // Every other thread also frees from a later key destructor.
        if ((t + wave) % 2) pthread_setspecific(g_late_key, &g_late_key);
        for (int i = 0; i < kEvents; ++i) torchseal::history::append(free_event(i));
      });
    for (auto &th : threads) th.join();
    appended += kPerWave * kEvents + kPerWave / 2;
  }
  stop.store(true);
  writer.join();
  // The final cut takes what exited threads left since the writer's last.
  sealed.fetch_add(count(buffers::cut()));
  sealed.fetch_add(count(buffers::cut()));
  CHECK(sealed.load() == appended);

  buffers::set_accepting(false);
  pthread_key_delete(g_late_key);
}
