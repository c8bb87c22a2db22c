// leak_in_loop: one source line leaks one 4 KiB buffer per iteration.
// All ten allocations form one leak site.
//
// EXPECT: leaks 1
// EXPECT: leak site=loop kind=device api=cudaMalloc bytes=40960 allocations=10 function=leak_every_iteration
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

__attribute__((noinline)) void leak_every_iteration(int iterations) {
  for (int i = 0; i < iterations; ++i) {
    void *scratch = nullptr;
    CHECK(cudaMalloc(&scratch, 4096));  // LEAK-SITE: loop
    // ... the buffer is "used" and forgotten ...
  }
}

int main() {
  // A balanced pair before and after, so the site is clearly the loop.
  void *keep = nullptr;
  CHECK(cudaMalloc(&keep, 8192));
  leak_every_iteration(10);
  CHECK(cudaFree(keep));
  example::print_calls();
  return 0;
}
