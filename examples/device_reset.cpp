// device_reset: the planted leaks, then cudaDeviceReset() before exit. The
// reset destroys the context, so everything still live is a leak detected at
// context teardown; it leaves the live table (not counted twice at exit).
//
// EXPECT: leaks 3
// EXPECT: leak site=device kind=device api=cudaMalloc bytes=1048576 allocations=1 detected_at=context-teardown function=leak_device_buffer
// EXPECT: leak site=async kind=stream-ordered api=cudaMallocAsync bytes=786432 allocations=3 detected_at=context-teardown function=leak_async_in_loop
// EXPECT: leak site=pinned kind=host-pinned api=cudaMallocHost bytes=65536 allocations=1 detected_at=context-teardown function=leak_pinned_staging
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

__attribute__((noinline)) void leak_device_buffer() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, 1u << 20));  // LEAK-SITE: device
}

__attribute__((noinline)) void leak_async_in_loop(cudaStream_t s) {
  for (int i = 0; i < 3; ++i) {
    void *p = nullptr;
    CHECK(cudaMallocAsync(&p, 256u << 10, s));  // LEAK-SITE: async
  }
}

__attribute__((noinline)) void leak_pinned_staging() {
  void *p = nullptr;
  CHECK(cudaMallocHost(&p, 64u << 10));  // LEAK-SITE: pinned
}

int main() {
  cudaStream_t s;
  CHECK_OTHER(cudaStreamCreate(&s));
  void *fine = nullptr;
  CHECK(cudaMalloc(&fine, 4096));
  leak_device_buffer();
  leak_async_in_loop(s);
  leak_pinned_staging();
  CHECK(cudaFree(fine));
  CHECK_OTHER(cudaStreamSynchronize(s));
  CHECK_OTHER(cudaDeviceReset());
  example::print_calls();
  return 0;
}
