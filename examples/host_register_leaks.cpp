// host_register_leaks: registered host memory through the runtime. One
// cudaHostRegister range is never unregistered (a leak of the registered
// range, reported under the runtime's name although the runtime registers
// it through the driver); another is registered, mapped, used and
// unregistered. Mapped pinned memory and managed memory with prefetch and
// advice are used and freed around them.
//
// EXPECT: leaks 1
// EXPECT: leak site=registered kind=host-registered api=cudaHostRegister bytes=131072 allocations=1 function=register_forever
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include <cstdlib>

#include "common.h"

__attribute__((noinline)) void *register_forever(size_t bytes) {
  void *p = std::aligned_alloc(4096, bytes);
  CHECK(cudaHostRegister(p, bytes, cudaHostRegisterMapped));  // LEAK-SITE: registered
  return p;
}

static void register_and_release(void *dev, size_t bytes) {
  void *p = std::aligned_alloc(4096, bytes);
  CHECK(cudaHostRegister(p, bytes, cudaHostRegisterDefault));
  void *mapped = nullptr;
  CHECK_OTHER(cudaHostGetDevicePointer(&mapped, p, 0));
  CHECK_OTHER(cudaMemcpy(p, dev, bytes, cudaMemcpyDeviceToHost));
  CHECK(cudaHostUnregister(p));
  std::free(p);
}

static void mapped_pinned(size_t bytes) {
  void *h = nullptr, *d = nullptr;
  CHECK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped));
  CHECK_OTHER(cudaHostGetDevicePointer(&d, h, 0));
  CHECK(cudaFreeHost(h));
}

static void prefetched_managed(size_t bytes) {
  void *m = nullptr;
  CHECK(cudaMallocManaged(&m, bytes, cudaMemAttachGlobal));
  cudaMemLocation device = {cudaMemLocationTypeDevice, 0};
  cudaMemLocation host = {cudaMemLocationTypeHost, 0};
  CHECK_OTHER(cudaMemAdvise(m, bytes, cudaMemAdviseSetPreferredLocation, device));
  CHECK_OTHER(cudaMemPrefetchAsync(m, bytes, device, 0, nullptr));
  CHECK_OTHER(cudaMemPrefetchAsync(m, bytes, host, 0, nullptr));
  CHECK_OTHER(cudaDeviceSynchronize());
  CHECK(cudaFree(m));
}

int main() {
  void *dev = nullptr;
  CHECK(cudaMalloc(&dev, 8192));
  register_forever(128 << 10);
  register_and_release(dev, 8192);
  mapped_pinned(4096);
  prefetched_managed(1 << 20);
  CHECK(cudaFree(dev));
  example::print_calls();
  return 0;
}
