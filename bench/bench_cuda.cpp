// (a) and (c): cudaMalloc+cudaFree pairs through the CUDA runtime (simcuda),
// made at call depth N. scripts/bench runs this binary bare and under
// LD_PRELOAD=libtorchseal.so; the difference is torchseal's added cost.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "common.h"

namespace {

constexpr size_t kPairBytes = 256;

struct LoopCtx {
  benchmark::State *state;
};

void cuda_pair_loop(void *p) {
  auto &st = *static_cast<LoopCtx *>(p)->state;
  for (auto _ : st) {
    void *ptr = nullptr;
    if (cudaMalloc(&ptr, kPairBytes) != cudaSuccess) {
      st.SkipWithError("cudaMalloc failed");
      break;
    }
    benchmark::DoNotOptimize(ptr);
    cudaFree(ptr);
  }
}

void warm_up_cuda() {
  // Context creation and the shim's first-call initialisation are not part
  // of the steady-state cost.
  void *p = nullptr;
  if (cudaMalloc(&p, kPairBytes) != cudaSuccess) {
    std::fprintf(stderr, "bench_cuda: cudaMalloc failed (is LD_LIBRARY_PATH simcuda?)\n");
    std::exit(2);
  }
  cudaFree(p);
}

// One alloc+free pair per iteration; items = events (2 per pair).
void BM_CudaPair(benchmark::State &state) {
  LoopCtx ctx{&state};
  bench::at_depth(static_cast<int>(state.range(0)), cuda_pair_loop, &ctx);
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_CudaPair)->ArgName("depth")->Arg(5)->Arg(30)->Arg(80);

// Several threads allocating at once, depth 30 each.
void BM_CudaPairThreads(benchmark::State &state) {
  LoopCtx ctx{&state};
  bench::at_depth(30, cuda_pair_loop, &ctx);
  state.SetItemsProcessed(state.iterations() * 2);
}
BENCHMARK(BM_CudaPairThreads)->Threads(1)->Threads(2)->Threads(4)->Threads(8)->UseRealTime();

}  // namespace

int main(int argc, char **argv) {
  warm_up_cuda();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
