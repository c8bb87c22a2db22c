// threads8: eight threads allocate and free concurrently. Half of the
// allocations are handed to a shared queue and freed by whichever thread
// pops them (cross-thread frees). Everything is freed; nothing leaks.
// Prints `calls=N`: the number of allocation and free calls made, which must
// equal summary.events exactly (no event lost or counted twice under
// contention).
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace {
constexpr int kThreads = 8;
constexpr int kIterations = 2000;

enum class Family { device, host, async };

struct Handoff {
  void *ptr;
  Family family;
};

std::mutex queue_mutex;
std::deque<Handoff> queue;

void release(const Handoff &h, cudaStream_t stream) {
  switch (h.family) {
    case Family::device: CHECK(cudaFree(h.ptr)); break;
    case Family::host: CHECK(cudaFreeHost(h.ptr)); break;
    case Family::async: CHECK(cudaFreeAsync(h.ptr, stream)); break;
  }
}

void worker(int id) {
  cudaStream_t stream = nullptr;
  CHECK_OTHER(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int i = 0; i < kIterations; ++i) {
    const size_t bytes = 256 * static_cast<size_t>(1 + (i + id) % 64);
    Handoff mine{nullptr, Family::device};
    Handoff shared{nullptr, Family::device};
    switch ((i + id) % 3) {
      case 0:
        CHECK(cudaMalloc(&mine.ptr, bytes));
        CHECK(cudaMalloc(&shared.ptr, bytes));
        break;
      case 1:
        mine.family = shared.family = Family::host;
        CHECK(cudaMallocHost(&mine.ptr, bytes));
        CHECK(cudaMallocHost(&shared.ptr, bytes));
        break;
      default:
        mine.family = shared.family = Family::async;
        CHECK(cudaMallocAsync(&mine.ptr, bytes, stream));
        CHECK(cudaMallocAsync(&shared.ptr, bytes, stream));
        // `shared` may be freed on another thread's stream: make it ready first.
        CHECK_OTHER(cudaStreamSynchronize(stream));
        break;
    }
    release(mine, stream);
    Handoff other{nullptr, Family::device};
    bool have_other = false;
    {
      std::lock_guard<std::mutex> lock(queue_mutex);
      queue.push_back(shared);
      if (queue.size() > 4) {
        other = queue.front();
        queue.pop_front();
        have_other = true;
      }
    }
    if (have_other) release(other, stream);
  }
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaStreamDestroy(stream));
}
}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto &t : threads) t.join();
  cudaStream_t stream = nullptr;
  CHECK_OTHER(cudaStreamCreate(&stream));
  for (const Handoff &h : queue) release(h, stream);
  queue.clear();
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaStreamDestroy(stream));
  std::printf("threads8: %d threads x %d iterations\n", kThreads, kIterations);
  example::print_calls();
  return 0;
}
