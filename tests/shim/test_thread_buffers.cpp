// The history's per-thread buffers (shim/core/thread_buffers.h) under threads
// that exit while the writer cuts passes: every event a thread appended,
// up to its last free before it exits, is in exactly one sealed chunk.
// A cut once forgot a buffer whose thread exited between its seal and the
// cut's end, with the events appended in between (a CI run lost a thread's
// last 1,600 frees that way). And every sealed chunk decodes alone to what
// was appended: an append once encoded a cut's first event against the
// codec state of the chunk the cut had just sealed.
#include <catch2/catch.hpp>

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <thread>
#include <vector>

#include "common/format/event_codec.h"
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

namespace {

// Event k of thread `tag`: an allocation (k even) or its free (k odd),
// every allocation of its own address and size, so a decode against the
// wrong delta state or recent-address cache shows.
torchseal::Event pair_event(uint64_t tag, uint64_t k) {
  torchseal::Event e{};
  e.time_ns = 1'000'000 + k * 7;
  e.op = k % 2 ? torchseal::Op::Free : torchseal::Op::Alloc;
  e.api = torchseal::ApiId::cudaMalloc;
  e.family = torchseal::Family::Device;
  e.addr = (tag << 40) + (k / 2) * 512;
  e.size = k % 2 ? 0 : 512 + (k / 2) % 1000;
  e.stack = static_cast<uint32_t>(k / 2 % 13 + 1);
  e.device = 0;
  return e;
}

}  // namespace

TEST_CASE("every chunk a cut seals decodes alone to the events appended") {
  buffers::init();
  buffers::set_accepting(true);
  // More threads than cores: preempted mid-append, now and then between
  // reading the buffer's state and marking itself busy.
  constexpr int kThreads = 8;
  constexpr uint64_t kEvents = 1'000'000;
  std::atomic<int> running{kThreads};
  std::vector<uint64_t> next(kThreads + 1, 0);  // by tag: the next event index expected
  uint64_t wrong = 0, decoded = 0;
  std::string first_wrong;
  auto check = [&](std::vector<buffers::Sealed> &&chunks) {
    for (const buffers::Sealed &c : chunks) {
      torchseal::tseal::ByteReader r(c.bytes.data(), c.bytes.size());
      torchseal::tseal::CodecState st;
      st.reset(c.base_time);
      for (uint32_t i = 0; i < c.count; ++i) {
        torchseal::Event e{};
        if (!torchseal::tseal::decode_event(r, st, e)) {
          ++wrong;
          break;
        }
        ++decoded;
        uint64_t tag = e.addr >> 40;
        if (tag < 1 || tag > kThreads) {
          if (!wrong++) first_wrong = "address " + std::to_string(e.addr);
          continue;
        }
        torchseal::Event want = pair_event(tag, next[tag]++);
        bool same = e.op == want.op && e.addr == want.addr && e.time_ns == want.time_ns &&
                    (e.op == torchseal::Op::Free || (e.size == want.size && e.stack == want.stack));
        if (!same && !wrong++)
          first_wrong = "thread " + std::to_string(tag) + " event " + std::to_string(next[tag] - 1);
      }
    }
    buffers::recycle(std::move(chunks));
  };
  std::vector<std::thread> threads;
  for (uint64_t tag = 1; tag <= kThreads; ++tag)
    threads.emplace_back([tag, &running] {
      for (uint64_t k = 0; k < kEvents; ++k) torchseal::history::append(pair_event(tag, k));
      running.fetch_sub(1);
    });
  buffers::set_writer_thread();
  while (running.load()) check(buffers::cut());
  for (auto &th : threads) th.join();
  check(buffers::cut());
  check(buffers::cut());
  INFO(first_wrong);
  CHECK(wrong == 0);
  CHECK(decoded == kThreads * kEvents);
  for (int tag = 1; tag <= kThreads; ++tag) CHECK(next[tag] == kEvents);
  buffers::set_accepting(false);
}

namespace torchseal::history {
extern std::atomic<int> test_stall_in_append_ms;  // thread_buffers.cpp, test builds
}

namespace {

// The (op, address) of every event in `chunks`, which go back to the pool.
std::vector<std::pair<torchseal::Op, uint64_t>> events_of(std::vector<buffers::Sealed> &&chunks) {
  std::vector<std::pair<torchseal::Op, uint64_t>> out;
  for (const buffers::Sealed &c : chunks) {
    torchseal::tseal::ByteReader r(c.bytes.data(), c.bytes.size());
    torchseal::tseal::CodecState st;
    st.reset(c.base_time);
    torchseal::Event e{};
    for (uint32_t i = 0; i < c.count && torchseal::tseal::decode_event(r, st, e); ++i)
      out.emplace_back(e.op, e.addr);
  }
  buffers::recycle(std::move(chunks));
  return out;
}

bool has(const std::vector<std::pair<torchseal::Op, uint64_t>> &events, torchseal::Op op,
         uint64_t addr) {
  return std::find(events.begin(), events.end(), std::make_pair(op, addr)) != events.end();
}

// Holds the next append (of whichever thread makes it) inside its busy
// window for `ms`, on a thread of its own; returns once it is held.
std::thread held_append(int ms, uint64_t addr) {
  torchseal::history::test_stall_in_append_ms.store(ms);
  std::thread t([addr] { torchseal::history::append(pair_event(addr >> 40, 0)); });
  while (torchseal::history::test_stall_in_append_ms.load() != 0) std::this_thread::yield();
  return t;
}

}  // namespace

TEST_CASE("a thread held inside an append puts the cut off, so a free never passes its allocation") {
  buffers::init();
  buffers::set_accepting(true);
  buffers::set_writer_thread();
  events_of(buffers::cut(true));
  using torchseal::Op;
  // Thread A allocates X and hands it to thread B, which frees it; A is
  // then held inside its next append (preempted) while the writer cuts.
  torchseal::Event alloc = pair_event(1, 0), freed = pair_event(1, 1);
  const uint64_t x = alloc.addr;
  std::thread a([&] { torchseal::history::append(alloc); });
  a.join();  // its buffer keeps the allocation
  std::thread b([&] { torchseal::history::append(freed); });
  b.join();
  std::thread held = held_append(700, 2ull << 40);
  // The cut is put off while a thread is inside an append: nothing
  // sealed (a cut without the held buffer would be fine here, but the
  // writer cannot know which thread made the allocation a free is of).
  auto first = events_of(buffers::cut());
  CHECK(first.empty());
  held.join();
  auto second = events_of(buffers::cut());
  CHECK(has(second, Op::Alloc, x));
  CHECK(has(second, Op::Free, x));
  CHECK(has(second, Op::Alloc, 2ull << 40));

  SECTION("a thread held for good: a few cuts are put off, then they go on without it") {
    std::thread c([] { torchseal::history::append(pair_event(3, 0)); });
    c.join();
    std::thread stuck = held_append(3000, 4ull << 40);
    int put_off = 0;
    std::vector<std::pair<Op, uint64_t>> got;
    while ((got = events_of(buffers::cut())).empty() && put_off < 10) ++put_off;
    CHECK(put_off == 3);
    CHECK(has(got, Op::Alloc, 3ull << 40));
    CHECK(!has(got, Op::Alloc, 4ull << 40));  // still held
    stuck.join();
    CHECK(has(events_of(buffers::cut()), Op::Alloc, 4ull << 40));
  }
  SECTION("the exit's or a crash's last cut waits for no one") {
    std::thread c([] { torchseal::history::append(pair_event(5, 0)); });
    c.join();
    std::thread stuck = held_append(800, 6ull << 40);
    auto last = events_of(buffers::cut(true));
    CHECK(has(last, Op::Alloc, 5ull << 40));
    stuck.join();
    CHECK(has(events_of(buffers::cut(true)), Op::Alloc, 6ull << 40));
  }
  buffers::set_accepting(false);
}
