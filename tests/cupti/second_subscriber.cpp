// second_subscriber: a program that starts its own CUPTI subscriber, as
// torch.profiler does, after torchseal began recording.
//
//   second_subscriber v1   cuptiSubscribe (Kineto, CUPTI 13.0 users)
//   second_subscriber v2   cuptiSubscribe_v2 asking for multi-subscriber mode (CUPTI 13.3)
//
// Before subscribing it leaks one buffer and keeps another that it frees
// after; a worker thread makes alloc/free pairs all through the switch. After
// subscribing, the main thread allocates, frees and leaks more, and checks
// that its own callback saw exactly those calls (exit 1 if not, or if its
// subscribe failed).
//
// EXPECT: leaks 2
// EXPECT: leak site=before kind=device api=cudaMalloc bytes=1048576 allocations=1 function=leak_before
// EXPECT: leak site=after kind=device api=cudaMalloc bytes=2097152 allocations=1 function=leak_after
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include <cupti.h>
#include <pthread.h>

#include <cstddef>
#include <cstring>
#include <thread>

#include "common.h"

namespace {

constexpr size_t kBefore = 1 << 20;
constexpr size_t kAfter = 2 << 20;
constexpr size_t kKept = 512 << 10;
constexpr size_t kPair = 4096;
constexpr long kWorkerPairs = 2000;  // on each side of the switch, at least

pthread_t g_main;
std::atomic<long> g_allocs{0}, g_frees{0};
std::atomic<long> g_worker_pairs{0};
std::atomic<bool> g_stop{false};

// The program's own subscriber: counts the main thread's driver allocations
// and frees that returned.
void CUPTIAPI count_calls(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void *data) {
  auto *cb = static_cast<const CUpti_CallbackData *>(data);
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_EXIT ||
      !pthread_equal(pthread_self(), g_main))
    return;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) g_allocs.fetch_add(1);
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) g_frees.fetch_add(1);
}

// CUpti_SubscriberParams with the member CUPTI 13.2+ headers add.
struct SubscriberParamsMulti {
  CUpti_SubscriberParams base;
  uint8_t allowMultipleSubscribers;
};

CUptiResult subscribe(bool v2, CUpti_SubscriberHandle *handle) {
  if (!v2) return cuptiSubscribe(handle, count_calls, nullptr);
  SubscriberParamsMulti p{};
  p.base.structSize = offsetof(SubscriberParamsMulti, allowMultipleSubscribers) + 1;
  p.base.subscriberName = "second_subscriber";
  p.allowMultipleSubscribers = 1;
  return cuptiSubscribe_v2(handle, count_calls, nullptr, &p.base);
}

void worker() {
  while (!g_stop.load()) {
    void *p = nullptr;
    CHECK(cudaMalloc(&p, kPair));
    CHECK(cudaFree(p));
    g_worker_pairs.fetch_add(1);
  }
}

void wait_worker(long pairs) {
  while (g_worker_pairs.load() < pairs) std::this_thread::yield();
}

}  // namespace

__attribute__((noinline)) void *leak_before() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kBefore));  // LEAK-SITE: before
  return p;
}

__attribute__((noinline)) void *leak_after() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kAfter));  // LEAK-SITE: after
  return p;
}

int main(int argc, char **argv) {
  bool v2 = argc > 1 && std::strcmp(argv[1], "v2") == 0;
  g_main = pthread_self();
  leak_before();
  void *kept = nullptr;
  CHECK(cudaMalloc(&kept, kKept));
  std::thread t(worker);
  wait_worker(kWorkerPairs);

  CUpti_SubscriberHandle handle = nullptr;
  CUptiResult r = subscribe(v2, &handle);
  if (r != CUPTI_SUCCESS) {
    std::printf("second_subscriber: subscribe failed (%d)\n", static_cast<int>(r));
    return 1;
  }
  cuptiEnableCallback(1, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
  cuptiEnableCallback(1, handle, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2);
  wait_worker(2 * kWorkerPairs);

  leak_after();
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kPair));
  CHECK(cudaFree(p));
  CHECK(cudaFree(kept));  // allocated before the switch
  g_stop.store(true);
  t.join();
  cuptiUnsubscribe(handle);

  std::printf("second_subscriber: saw allocs=%ld frees=%ld\n", g_allocs.load(), g_frees.load());
  example::print_calls();
  return g_allocs.load() == 2 && g_frees.load() == 2 ? 0 : 1;
}
