// callback_frees: the shape of the cuda-samples program whose peak read
// 2^64 - 400000. The main thread allocates every buffer; eight worker
// threads free them, each woken by a host function on its own stream
// (cudaLaunchHostFunc for even workers, cudaStreamAddCallback for odd ones:
// a host function may not call CUDA itself, so it hands the buffer over).
// The workers never allocate. One buffer is kept: a planted leak.
// Prints `peak=N`, the most bytes the program held at once; with a single
// allocating thread summary.peak_bytes must be exactly that.
//
// EXPECT: leaks 1
// EXPECT: leak site=kept kind=device api=cudaMalloc bytes=400000 allocations=1 function=main
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout
// EXPECT: peak-from-stdout

#include "common.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {
constexpr int kWorkers = 8;
constexpr int kRounds = 40;
constexpr size_t kBuffer = 400000;

struct Worker {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<void *> to_free;  // nullptr: stop
  cudaStream_t stream = nullptr;
  std::thread thread;
};

std::mutex done_mutex;
std::condition_variable done_cv;
int freed = 0;

struct Handoff {
  Worker *worker;
  void *ptr;
};

void hand_over(void *data) {
  auto *h = static_cast<Handoff *>(data);
  {
    std::lock_guard<std::mutex> lock(h->worker->mutex);
    h->worker->to_free.push_back(h->ptr);
  }
  h->worker->wake.notify_one();
  delete h;
}

void CUDART_CB stream_callback(cudaStream_t, cudaError_t, void *data) { hand_over(data); }

void work(Worker *w) {
  for (;;) {
    void *p;
    {
      std::unique_lock<std::mutex> lock(w->mutex);
      w->wake.wait(lock, [w] { return !w->to_free.empty(); });
      p = w->to_free.front();
      w->to_free.pop_front();
    }
    if (!p) return;
    CHECK(cudaFree(p));
    {
      std::lock_guard<std::mutex> lock(done_mutex);
      ++freed;
    }
    done_cv.notify_one();
  }
}
}  // namespace

int main() {
  std::vector<Worker> workers(kWorkers);
  for (Worker &w : workers) {
    CHECK_OTHER(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
    w.thread = std::thread(work, &w);
  }
  void *kept = nullptr;
  CHECK(cudaMalloc(&kept, kBuffer));  // LEAK-SITE: kept
  size_t held = kBuffer, peak = held;
  int handed = 0;
  for (int round = 0; round < kRounds; ++round) {
    // Everything of a round is allocated before any of it is handed over,
    // so the program's own count of what it holds is exact.
    const int n = 1 + round % kWorkers;
    std::vector<void *> bufs(n);
    for (int i = 0; i < n; ++i) {
      CHECK(cudaMalloc(&bufs[i], kBuffer));
      held += kBuffer;
      if (held > peak) peak = held;
    }
    for (int i = 0; i < n; ++i) {
      Worker &w = workers[i];
      auto *h = new Handoff{&w, bufs[i]};
      if (i % 2 == 0)
        CHECK_OTHER(cudaLaunchHostFunc(w.stream, hand_over, h));
      else
        CHECK_OTHER(cudaStreamAddCallback(w.stream, stream_callback, h, 0));
    }
    handed += n;
    std::unique_lock<std::mutex> lock(done_mutex);
    done_cv.wait(lock, [&] { return freed == handed; });
    held -= static_cast<size_t>(n) * kBuffer;
  }
  for (Worker &w : workers) {
    {
      std::lock_guard<std::mutex> lock(w.mutex);
      w.to_free.push_back(nullptr);
    }
    w.wake.notify_one();
    w.thread.join();
    CHECK_OTHER(cudaStreamDestroy(w.stream));
  }
  std::printf("peak=%zu\n", peak);
  example::print_calls();
  return 0;
}
