// Shared helpers for the torchseal example programs.
//
// Every example is a plain CUDA C++ host program (no kernels, no nvcc). Each
// one states, in its header comment, the report torchseal must produce for it
// (compiler-rt lit style). tests/integration/run.py reads those lines:
//
//   // EXPECT: leaks N                      exact number of leak sites
//   // EXPECT: leak site=S kind=K api=A bytes=B allocations=M function=F
//                                            one leak; S names a `// LEAK-SITE: S`
//                                            marker on the allocating line, which
//                                            must be frames[0].file:line; with
//                                            sites=N, N sites at that line (different
//                                            stacks) whose sums are B and M
//   // EXPECT: ooms N / oom api=A requested_bytes=B
//   // EXPECT: invalid_frees N / invalid_free api=A
//   // EXPECT: exit N                       exit status without TORCHSEAL_EXIT_CODE
//   // EXPECT: events-from-stdout           summary.events == the `calls=N` line
//   // EXPECT: peak-from-stdout             summary.peak_bytes == the `peak=N` line
//   // EXPECT: active-line                  stderr says torchseal is active (info)
//   // ENV: NAME=VALUE                      extra environment for the run
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace example {

// Counts the allocation/free API calls the program makes, so a test can
// compare it with the report's summary.events.
inline std::atomic<long> calls{0};

[[noreturn]] inline void die(const char *what, cudaError_t err, const char *file, int line) {
  std::fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", file, line, what,
               cudaGetErrorString(err), static_cast<int>(err));
  std::exit(1);
}

inline void print_calls() { std::printf("calls=%ld\n", calls.load()); }

}  // namespace example

// Wrap an allocation/free call: counts it and aborts the example on error.
// Keep the whole call on one source line: that line is the expected frame.
#define CHECK(call)                                                      \
  do {                                                                   \
    ::example::calls.fetch_add(1, std::memory_order_relaxed);            \
    cudaError_t check_err_ = (call);                                     \
    if (check_err_ != cudaSuccess)                                       \
      ::example::die(#call, check_err_, __FILE__, __LINE__);             \
  } while (0)

// For non-allocation calls (streams, sync, pools): checked, not counted.
#define CHECK_OTHER(call)                                                \
  do {                                                                   \
    cudaError_t check_err_ = (call);                                     \
    if (check_err_ != cudaSuccess)                                       \
      ::example::die(#call, check_err_, __FILE__, __LINE__);             \
  } while (0)
