// Allocates from frames of every shape (zoo_frames.cpp, built without frame
// pointers), from a signal handler, an alternate signal stack, threads and a
// plugin that is loaded and unloaded again. Run under
// TORCHSEAL_UNWIND=check, every captured stack is walked by both the fast
// walker and libunwind and any difference is counted (tests/unwind/run.py).
//
//   unwind_zoo [leak|rbp-loop|deep-after-shallow] PLUGIN.so
//   leak: keep one allocation per shape, so the reports of two runs can be
//         compared site by site.
//   rbp-loop: only 1000 allocations from one site whose callers keep a
//         changing counter in rbp (each walk but the first may end in the
//         last one's frames).
//   deep-after-shallow: only 500 allocations 25 frames of one recursing
//         function deep, then 1000 at 75: past the default stack depth
//         (64), where the deeper stacks' outer frames are the shallower
//         ones' (each walk but the first of each may end in the memo).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "zoo_frames.h"

namespace {

bool g_leak = false;

void alloc_free(void *) {
  void *p = nullptr;
  if (cudaMalloc(&p, 512) != cudaSuccess) {
    std::fprintf(stderr, "unwind_zoo: cudaMalloc failed\n");
    std::exit(1);
  }
  cudaFree(p);
}

void alloc_keep(void *) {
  void *p = nullptr;
  if (cudaMalloc(&p, 1024) != cudaSuccess) std::exit(1);
}

void (*leaf())(void *) { return g_leak ? alloc_keep : alloc_free; }

// One function recursing: every frame the same return address, as in
// bench_cuda's depth driver.
__attribute__((noinline)) void recurse(int depth) {
  if (depth <= 0)
    alloc_free(nullptr);
  else
    recurse(depth - 1);
  asm volatile("" ::: "memory");
}

void on_signal(int) { alloc_free(nullptr); }

void raise_leaf(void *sig) { raise(*static_cast<int *>(sig)); }

void signals() {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR2, &sa, nullptr);
  int usr2 = SIGUSR2;
  zoo_mixed(4, raise_leaf, &usr2);

  // The same on an alternate stack: not the thread's stack, so the walker
  // must hand the capture to libunwind.
  static std::vector<char> alt(1 << 16);
  stack_t ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  sigaltstack(&ss, nullptr);
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGURG, &sa, nullptr);
  int urg = SIGURG;
  zoo_mixed(3, raise_leaf, &urg);
}

// 100 rounds of loading and unloading the plugin without running it: no
// rule was learned for its code, so no unload may cost the walker its rule
// table (of which it can replace 64): the marker line comes first, the
// walker's "unloaded too often" line (from plugin() below) after it.
void quiet_plugin(const char *path) {
  for (int round = 0; round < 100; ++round) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !dlsym(h, "zoo_plugin_alloc")) {
      std::fprintf(stderr, "unwind_zoo: %s\n", dlerror());
      std::exit(1);
    }
    dlclose(h);
  }
  for (int i = 0; i < 5; ++i) zoo_mixed(5, leaf(), nullptr);  // the rules still serve
  std::fprintf(stderr, "unwind_zoo: quiet unloads done\n");
}

// 70 rounds: past the 64 rule tables the walker may retire, so the run also
// covers its switch to libunwind.
void plugin(const char *path) {
  for (int round = 0; round < 70; ++round) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "unwind_zoo: %s\n", dlerror());
      std::exit(1);
    }
    auto fn = reinterpret_cast<int (*)(int)>(dlsym(h, "zoo_plugin_alloc"));
    for (int i = 0; i < 5; ++i)
      if (!fn || fn(3 + i) != 0) std::exit(1);
    dlclose(h);
  }
}

}  // namespace

int main(int argc, char **argv) {
  int a = 1;
  if (a < argc && strcmp(argv[a], "leak") == 0) {
    g_leak = true;
    ++a;
  } else if (a < argc && strcmp(argv[a], "deep-after-shallow") == 0) {
    // One call site: the two stacks share their outer frames.
    for (int i = 0; i < 1500; ++i) recurse(i < 500 ? 25 : 75);
    std::puts("unwind_zoo: done");
    return 0;
  } else if (a < argc && strcmp(argv[a], "rbp-loop") == 0) {
    zoo_rbp_counter(1000, alloc_free, nullptr);
    std::puts("unwind_zoo: done");
    return 0;
  }
  if (a >= argc) {
    std::fprintf(stderr, "usage: unwind_zoo [leak|rbp-loop|deep-after-shallow] PLUGIN.so\n");
    return 2;
  }
  for (int depth = 0; depth <= 40; depth += g_leak ? 20 : 1)
    for (int rep = 0; rep < (g_leak ? 1 : 3); ++rep) zoo_mixed(depth, leaf(), nullptr);
  zoo_realigned(leaf(), nullptr);
  zoo_alloca(100, leaf(), nullptr);
  if (g_leak) return 0;

  signals();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 50; ++i) zoo_mixed(5 + (i + t) % 20, alloc_free, nullptr);
    });
  for (auto &t : threads) t.join();
  quiet_plugin(argv[a]);
  plugin(argv[a]);
  std::puts("unwind_zoo: done");
  return 0;
}
