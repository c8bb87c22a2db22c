// pinned_managed_leaks: leaks one managed allocation and one cudaHostAlloc
// buffer. Both kinds must be reported with their own kind.
//
// EXPECT: leaks 2
// EXPECT: leak site=managed kind=managed api=cudaMallocManaged bytes=131072 allocations=1 function=leak_managed
// EXPECT: leak site=hostalloc kind=host-pinned api=cudaHostAlloc bytes=32768 allocations=1 function=leak_host_alloc
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

__attribute__((noinline)) void *leak_managed() {
  void *p = nullptr;
  CHECK(cudaMallocManaged(&p, 128 << 10, cudaMemAttachGlobal));  // LEAK-SITE: managed
  return p;
}

__attribute__((noinline)) void *leak_host_alloc() {
  void *p = nullptr;
  CHECK(cudaHostAlloc(&p, 32 << 10, cudaHostAllocMapped));  // LEAK-SITE: hostalloc
  return p;
}

int main() {
  leak_managed();
  leak_host_alloc();
  // Same families, freed: not leaks.
  void *m = nullptr;
  CHECK(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal));
  CHECK(cudaFree(m));
  void *h = nullptr;
  CHECK(cudaHostAlloc(&h, 4096, cudaHostAllocDefault));
  CHECK(cudaFreeHost(h));
  example::print_calls();
  return 0;
}
