// omp_leaks: four OpenMP threads allocate inside a parallel region. GCC
// outlines the region into main._omp_fn.0, a subprogram nested in main's
// debug information whose code lies outside main's address range; the
// frame must still carry its file and line. Each thread keeps one of its
// eight buffers (a planted leak), and a lambda called in the region keeps
// one more. Every thread's share is small, so the shim's per-thread counts
// never reach the global one before exit: summary.peak_bytes once read 32768
// beside 131072 bytes leaked. The main thread runs the region from main, the
// team's threads from libgomp: two stacks, so two sites per line.
//
// EXPECT: leaks 4
// EXPECT: leak site=omp-region sites=2 kind=device api=cudaMalloc bytes=131072 allocations=4 function=main._omp_fn.0
// EXPECT: leak site=lambda sites=2 kind=device api=cudaMalloc bytes=16384 allocations=4 function=lambda
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

#include <omp.h>

int main() {
  constexpr int kThreads = 4, kPerThread = 8;
  constexpr size_t kBuffer = 32768, kSmall = 4096;
  auto keep_small = [](void **p) {
    CHECK(cudaMalloc(p, kSmall));  // LEAK-SITE: lambda
  };
  int team = 0;
#pragma omp parallel num_threads(kThreads)
  {
#pragma omp single
    team = omp_get_num_threads();
    void *bufs[kPerThread];
    for (int i = 0; i < kPerThread; ++i) {
      CHECK(cudaMalloc(&bufs[i], kBuffer));  // LEAK-SITE: omp-region
    }
    for (int i = 1; i < kPerThread; ++i) CHECK(cudaFree(bufs[i]));
    void *small = nullptr;
    keep_small(&small);
  }
  if (team != kThreads) {
    std::fprintf(stderr, "omp_leaks: the team has %d threads, not %d\n", team, kThreads);
    return 1;
  }
  example::print_calls();
  return 0;
}
