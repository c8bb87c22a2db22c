// signals_chain MODE: the program's own SIGUSR1 handler and torchseal's.
//   before  the program installs its handler BEFORE the first CUDA call (so
//           before torchseal initialises). torchseal's handler chains to it:
//           after raise(SIGUSR1) the program's handler has run once AND a
//           dump (P.1.json) is written.
//   after   the program installs its handler AFTER torchseal initialised. It
//           replaces torchseal's (the program's choice): the program's
//           handler runs; no dump is expected.
//   ignore  the program sets SIG_IGN before the first CUDA call; torchseal
//           still dumps, and the signal does not kill the program.
// Prints `handler_calls=N`. Exits 0 when the program's handler count is
// right (1 for before/after, 0 for ignore).
//
// EXPECT: exit 0

#include "common.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

namespace {
volatile sig_atomic_t handler_calls = 0;
void on_usr1(int) { handler_calls = handler_calls + 1; }

void install(void (*fn)(int)) {
  struct sigaction sa {};
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);
}
}  // namespace

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "before";
  bool before = std::strcmp(mode, "before") == 0;
  bool after = std::strcmp(mode, "after") == 0;
  bool ignore = std::strcmp(mode, "ignore") == 0;
  if (before) install(on_usr1);
  if (ignore) install(SIG_IGN);
  void *p = nullptr;
  CHECK(cudaMalloc(&p, 1024));  // torchseal initialises here
  if (after) install(on_usr1);
  raise(SIGUSR1);
  // Give the writer thread time to write the dump before exit.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK(cudaFree(p));
  std::printf("handler_calls=%d\n", static_cast<int>(handler_calls));
  example::print_calls();
  int want = ignore ? 0 : 1;
  return handler_calls == want ? 0 : 1;
}
