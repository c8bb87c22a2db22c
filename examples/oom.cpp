// oom: allocates 4 MiB device buffers until the device is full, then frees
// everything and exits 0. Run with a small simulated device (see ENV below).
// The failed request is an OOM event; its forensics must name the loop line as
// the site holding the live memory. Prints `live_bytes=N` (bytes live when the
// allocation failed) and `calls=N`.
//
// ENV: SIMCUDA_MEMORY_BYTES=67108864
// EXPECT: leaks 0
// EXPECT: ooms 1
// EXPECT: oom site=fill api=cudaMalloc requested_bytes=4194304 top_site=fill
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

#include <vector>

namespace {
constexpr size_t kChunk = 4 << 20;
constexpr size_t kMaxChunks = 100000;  // give up: the device is not small
}  // namespace

__attribute__((noinline)) cudaError_t grab(void **p) {
  example::calls.fetch_add(1);
  return cudaMalloc(p, kChunk);  // SITE: fill
}

int main() {
  std::vector<void *> held;
  cudaError_t err = cudaSuccess;
  while (held.size() < kMaxChunks) {
    void *p = nullptr;
    err = grab(&p);
    if (err != cudaSuccess) break;
    held.push_back(p);
  }
  if (err != cudaErrorMemoryAllocation) {
    std::fprintf(stderr, "oom: expected cudaErrorMemoryAllocation after %zu chunks, got %d\n",
                 held.size(), static_cast<int>(err));
    return 1;
  }
  (void)cudaGetLastError();
  std::printf("chunks=%zu\nlive_bytes=%zu\n", held.size(), held.size() * kChunk);
  for (void *p : held) CHECK(cudaFree(p));
  // The device is usable again after the OOM.
  void *again = nullptr;
  CHECK(cudaMalloc(&again, kChunk));
  CHECK(cudaFree(again));
  example::print_calls();
  return 0;
}
