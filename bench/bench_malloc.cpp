// heaptrack's side of (a): malloc+free pairs at call depth N, run bare and
// under `heaptrack` by scripts/bench, so both tools are measured on the same
// machine in the same run.
#include <benchmark/benchmark.h>

#include <cstdlib>

#include "common.h"

namespace {

// Through volatile pointers so the compiler cannot elide the pair.
void *(*volatile g_malloc)(size_t) = std::malloc;
void (*volatile g_free)(void *) = std::free;

struct LoopCtx {
  benchmark::State *state;
};

void malloc_pair_loop(void *p) {
  auto &st = *static_cast<LoopCtx *>(p)->state;
  for (auto _ : st) {
    void *ptr = g_malloc(256);
    benchmark::DoNotOptimize(ptr);
    g_free(ptr);
  }
}

void BM_MallocPair(benchmark::State &state) {
  LoopCtx ctx{&state};
  bench::at_depth(static_cast<int>(state.range(0)), malloc_pair_loop, &ctx);
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_MallocPair)->ArgName("depth")->Arg(5)->Arg(30)->Arg(80);

}  // namespace

BENCHMARK_MAIN();
