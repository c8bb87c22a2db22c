// crash_points MODE [SEED]: allocates and frees at a random pace, keeps a few
// allocations live, then ends abruptly at a random point:
//   segv   touches a device pointer from the host (SIGSEGV in user code)
//   abort  calls abort()
//   exit   calls _exit(7) (no destructors, no atexit)
//   kill   raises SIGKILL after a pause longer than the history flush interval
//   return returns 0 normally (the control case)
// Before ending it prints `calls=N` (and for kill `calls_before_pause=N`) and
// flushes stdout, so a test can compare with the history file.
//
// EXPECT: exit 0
// ENV: (run by tests/reliability/run.py, not by the example runner)

#include "common.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {
void churn(std::mt19937 &rng, int pairs, std::vector<void *> &live) {
  for (int i = 0; i < pairs; ++i) {
    void *p = nullptr;
    CHECK(cudaMalloc(&p, 512 + rng() % 4096));
    if (rng() % 16 == 0) {
      live.push_back(p);
    } else {
      CHECK(cudaFree(p));
    }
  }
}
}  // namespace

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "return";
  unsigned seed = argc > 2 ? static_cast<unsigned>(std::strtoul(argv[2], nullptr, 0))
                           : static_cast<unsigned>(getpid());
  std::mt19937 rng(seed);
  std::vector<void *> live;
  churn(rng, 200 + static_cast<int>(rng() % 3000), live);
  if (std::strcmp(mode, "kill") == 0) {
    std::printf("calls_before_pause=%ld\n", example::calls.load());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    churn(rng, static_cast<int>(rng() % 500), live);
  }
  std::printf("seed=%u live=%zu\n", seed, live.size());
  example::print_calls();
  std::fflush(stdout);
  if (std::strcmp(mode, "segv") == 0) {
    void *d = nullptr;
    CHECK(cudaMalloc(&d, 4096));
    std::printf("calls=%ld\n", example::calls.load());
    std::fflush(stdout);
    *static_cast<volatile char *>(d) = 1;  // device memory: faults on the host
    std::printf("not reached\n");
  } else if (std::strcmp(mode, "abort") == 0) {
    std::abort();
  } else if (std::strcmp(mode, "exit") == 0) {
    _exit(7);
  } else if (std::strcmp(mode, "kill") == 0) {
    raise(SIGKILL);
  }
  for (void *p : live) CHECK(cudaFree(p));
  std::printf("calls=%ld\n", example::calls.load());
  return 0;
}
