// planted_leaks: the torchseal acceptance program.
//
// It plants exactly three leaks, each in its own named, non-inlined function,
// frees everything else (one pointer is freed on a different thread), and makes
// one allocation request that cannot succeed (1 PiB), which must be reported
// as an OOM. It exits 0.
//
// Built three ways from this one source (examples/meson.build):
//   planted_leaks          linked against simcuda's libcudart.so.13
//   planted_leaks_realrt   linked against the toolkit's real libcudart.so.13,
//                          run with LD_LIBRARY_PATH=<simcuda> (ABI test)
//   planted_leaks_static   linked against simcuda's libcudart_static.a
//
// Expected report (read by tests/integration/run.py):
// EXPECT: leaks 3
// EXPECT: leak site=device kind=device api=cudaMalloc bytes=1048576 allocations=1 function=leak_device_buffer
// EXPECT: leak site=async kind=stream-ordered api=cudaMallocAsync bytes=786432 allocations=3 function=leak_async_in_loop
// EXPECT: leak site=pinned kind=host-pinned api=cudaMallocHost bytes=65536 allocations=1 function=leak_pinned_staging
// EXPECT: ooms 1
// EXPECT: oom site=pebibyte api=cudaMalloc requested_bytes=1125899906842624
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout
//
// Equivalent P.txt ending:
//   SUMMARY: torchseal: 1900544 byte(s) leaked in 5 allocation(s).

#include "common.h"

#include <cstddef>
#include <thread>

namespace {
constexpr size_t kDeviceLeak = 1 << 20;   // 1 MiB
constexpr size_t kAsyncLeak = 256 << 10;  // 256 KiB, three times
constexpr size_t kPinnedLeak = 64 << 10;  // 64 KiB
constexpr size_t kOnePiB = size_t{1} << 50;
}  // namespace

__attribute__((noinline)) void *leak_device_buffer() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kDeviceLeak));  // LEAK-SITE: device
  return p;
}

__attribute__((noinline)) void leak_async_in_loop(cudaStream_t stream) {
  void *ptrs[3] = {};
  for (int i = 0; i < 3; ++i) {
    CHECK(cudaMallocAsync(&ptrs[i], kAsyncLeak, stream));  // LEAK-SITE: async
  }
  CHECK_OTHER(cudaStreamSynchronize(stream));
}

__attribute__((noinline)) void *leak_pinned_staging() {
  void *p = nullptr;
  CHECK(cudaMallocHost(&p, kPinnedLeak));  // LEAK-SITE: pinned
  return p;
}

// Allocates and frees one of each family: none of this may be reported.
__attribute__((noinline)) void balanced_work(cudaStream_t stream) {
  void *d = nullptr;
  CHECK(cudaMalloc(&d, 4096));
  CHECK(cudaFree(d));

  void *pitched = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 16));
  CHECK(cudaFree(pitched));

  void *a = nullptr;
  CHECK(cudaMallocAsync(&a, 8192, stream));
  CHECK(cudaFreeAsync(a, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));

  void *m = nullptr;
  CHECK(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
  CHECK(cudaFree(m));

  void *h = nullptr;
  CHECK(cudaHostAlloc(&h, 4096, cudaHostAllocDefault));
  CHECK(cudaFreeHost(h));
}

__attribute__((noinline)) void request_one_pebibyte() {
  void *p = nullptr;
  example::calls.fetch_add(1);
  cudaError_t err = cudaMalloc(&p, kOnePiB);  // OOM-SITE: pebibyte
  if (err != cudaErrorMemoryAllocation) {
    std::fprintf(stderr, "planted_leaks: expected cudaErrorMemoryAllocation for 1 PiB, got %d\n",
                 static_cast<int>(err));
    std::exit(1);
  }
  (void)cudaGetLastError();  // clear the (non-sticky) error
}

int main() {
  cudaStream_t stream = nullptr;
  CHECK_OTHER(cudaStreamCreate(&stream));

  leak_device_buffer();
  leak_async_in_loop(stream);
  leak_pinned_staging();

  balanced_work(stream);

  // Allocated on the main thread, freed on another one: not a leak.
  void *cross = nullptr;
  CHECK(cudaMalloc(&cross, 32768));
  std::thread freer([cross] { CHECK(cudaFree(cross)); });
  freer.join();

  request_one_pebibyte();

  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaStreamDestroy(stream));
  std::printf("planted_leaks: done\n");
  example::print_calls();
  return 0;
}
