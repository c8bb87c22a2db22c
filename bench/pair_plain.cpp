// pair_plain: the alloc+free pair as a plain program sees it, with no
// benchmark harness in the loop. D distinct functions deep (each its own
// code and return address, as in a real call stack; not one function
// recursing), it makes N pairs and prints their cost:
//
//   pair_plain MODE DEPTH PAIRS [recursive]
//     MODE  cuda (cudaMalloc(256)/cudaFree), async (cudaMallocAsync/
//           cudaFreeAsync on a stream), malloc (malloc/free: heaptrack's
//           view of the same loop)
//     recursive  one function recursing DEPTH times instead (bench_cuda's
//           stack shape: every frame the same return address)
//   prints  wall_ns_per_pair=W cpu_ns_per_pair=C
//
// bench/run_bench.py runs it bare, under the shim and under heaptrack in
// interleaved rounds; on a lent GPU scripts/real-gpu-device runs it too.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

struct Loop {
  int mode = 0;  // 0 cuda, 1 async, 2 malloc
  long pairs = 0;
  cudaStream_t stream = nullptr;
  int failures = 0;
};

__attribute__((noinline)) void pairs(Loop *l) {
  for (long i = 0; i < l->pairs; ++i) {
    if (l->mode == 2) {
      void *p = std::malloc(256);
      asm volatile("" : : "r"(p) : "memory");
      std::free(p);
    } else if (l->mode == 1) {
      void *p = nullptr;
      if (cudaMallocAsync(&p, 256, l->stream) != cudaSuccess) ++l->failures;
      if (cudaFreeAsync(p, l->stream) != cudaSuccess) ++l->failures;
    } else {
      void *p = nullptr;
      if (cudaMalloc(&p, 256) != cudaSuccess) ++l->failures;
      if (cudaFree(p) != cudaSuccess) ++l->failures;
    }
  }
}

// level<N> calls level<N-1>: N distinct functions on the stack.
template <int N>
__attribute__((noinline)) void level(Loop *l) {
  level<N - 1>(l);
  asm volatile("" ::: "memory");  // not a tail call
}
template <>
__attribute__((noinline)) void level<1>(Loop *l) {
  pairs(l);
  asm volatile("" ::: "memory");
}

// One function recursing: the stack bench::at_depth (Google Benchmark's
// bench_cuda) builds, kept for comparison (bench/RESULTS.md).
__attribute__((noinline)) void recurse(Loop *l, int depth) {
  if (depth <= 1)
    pairs(l);
  else
    recurse(l, depth - 1);
  asm volatile("" ::: "memory");
}

using Entry = void (*)(Loop *);
// The depths the benchmarks use (frames of this program above the pair,
// main included: main -> level<D-1> ... level<1> -> pairs).
struct Depth {
  int depth;
  Entry entry;
};
const Depth kDepths[] = {{5, level<3>}, {30, level<28>}, {80, level<78>}};

double seconds(clockid_t c) {
  timespec t;
  clock_gettime(c, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 4 && !(argc == 5 && !std::strcmp(argv[4], "recursive"))) {
    std::fprintf(stderr, "usage: pair_plain cuda|async|malloc DEPTH(5|30|80) PAIRS [recursive]\n");
    return 2;
  }
  Loop l;
  l.mode = !std::strcmp(argv[1], "async") ? 1 : !std::strcmp(argv[1], "malloc") ? 2 : 0;
  if (l.mode == 0 && std::strcmp(argv[1], "cuda") != 0) {
    std::fprintf(stderr, "pair_plain: unknown mode %s\n", argv[1]);
    return 2;
  }
  Entry entry = nullptr;
  for (const Depth &d : kDepths)
    if (d.depth == std::atoi(argv[2])) entry = d.entry;
  if (!entry) {
    std::fprintf(stderr, "pair_plain: depth must be 5, 30 or 80\n");
    return 2;
  }
  l.pairs = std::atol(argv[3]);
  if (l.mode != 2) {
    void *p = nullptr;
    if (cudaStreamCreate(&l.stream) != cudaSuccess || cudaMalloc(&p, 256) != cudaSuccess ||
        cudaFree(p) != cudaSuccess) {
      std::fprintf(stderr, "pair_plain: CUDA is not usable\n");
      return 1;
    }
  }
  // A warm-up tenth first (caches, the shim's learned rules, pools).
  Loop warm = l;
  warm.pairs = l.pairs / 10 + 1;
  int depth = std::atoi(argv[2]);
  bool recursive = argc == 5;
  // recurse() from main: main + (depth - 2) recursions + pairs = depth frames.
  auto run = [&](Loop *x) { recursive ? recurse(x, depth - 2) : entry(x); };
  run(&warm);
  double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
  run(&l);
  double w1 = seconds(CLOCK_MONOTONIC), c1 = seconds(CLOCK_PROCESS_CPUTIME_ID);
  if (l.mode == 1) cudaStreamSynchronize(l.stream);
  if (l.failures + warm.failures) {
    std::fprintf(stderr, "pair_plain: %d CUDA calls failed\n", l.failures + warm.failures);
    return 1;
  }
  std::printf("wall_ns_per_pair=%.1f cpu_ns_per_pair=%.1f\n", (w1 - w0) * 1e9 / l.pairs,
              (c1 - c0) * 1e9 / l.pairs);
  return 0;
}
