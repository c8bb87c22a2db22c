// One-shot workloads measured from outside by scripts/bench:
//
//   bench_workload mixed N     (d), (e): N allocation events (allocs + frees)
//                              from ~5000 distinct stacks (100 call paths x
//                              depths 1..50), sizes log-uniform 512 B..64 MiB
//                              rounded to 512, frees mostly LIFO with some
//                              long-lived allocations.
//   bench_workload pairs N D   N cudaMalloc+cudaFree pairs at call depth D
//                              (fixed count, for callgrind).
//   bench_workload live N      (f): N live allocations from one call site;
//                              prints RSS before and after, then frees them.
//   bench_workload steps N ... (h): N events over training steps from
//                              several threads, with planted leaks and
//                              growth and a ledger of them
//                              (bench/workload_steps.cpp).
//
// Prints one JSON object on stdout.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "workload_paths.h"

namespace {

long rss_kib() {
  FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::strtol(line + 6, nullptr, 10);
  std::fclose(f);
  return kib;
}

using bench::AllocReq;
using bench::do_alloc;
using bench::kDepths;
using bench::kPaths;

int mixed(uint64_t n_events) {
  bench::Rng rng(42);
  std::vector<void *> lifo, longlived;
  uint64_t events = 0, allocs = 0, frees = 0, failed = 0;
  auto free_one = [&](void *p) {
    cudaFree(p);
    ++events;
    ++frees;
  };
  while (events < n_events) {
    double p_alloc = lifo.size() < 16 ? 0.7 : lifo.size() > 256 ? 0.3 : 0.5;
    if (events + lifo.size() + longlived.size() + 1 >= n_events) p_alloc = 0;  // drain
    if (lifo.empty() && longlived.empty()) p_alloc = 1;
    if (rng.uniform() < p_alloc) {
      int site = static_cast<int>(rng.next() % (kPaths * kDepths));
      AllocReq r{bench::draw_size(rng, 512.0, 64.0 * 1024 * 1024), nullptr};
      bench::alloc_at_site(site, &r);
      if (!r.ptr) {
        ++failed;
        continue;
      }
      ++events;
      ++allocs;
      if (rng.uniform() < 0.03) {
        longlived.push_back(r.ptr);
        if (longlived.size() > 1000) {
          size_t i = rng.next() % longlived.size();
          std::swap(longlived[i], longlived.back());
          free_one(longlived.back());
          longlived.pop_back();
        }
      } else {
        lifo.push_back(r.ptr);
      }
    } else if (!lifo.empty()) {
      size_t i = lifo.size() - 1;
      if (rng.uniform() < 0.1) i = rng.next() % lifo.size();
      std::swap(lifo[i], lifo.back());
      free_one(lifo.back());
      lifo.pop_back();
    } else if (!longlived.empty()) {
      free_one(longlived.back());
      longlived.pop_back();
    }
    if (p_alloc == 0 && lifo.empty() && longlived.empty()) break;
  }
  std::printf(
      "{\"mode\":\"mixed\",\"events\":%llu,\"allocs\":%llu,\"frees\":%llu,"
      "\"failed_allocs\":%llu,\"distinct_sites\":%d}\n",
      (unsigned long long)events, (unsigned long long)allocs, (unsigned long long)frees,
      (unsigned long long)failed, kPaths * kDepths);
  return failed ? 1 : 0;
}

int live(uint64_t n) {
  std::vector<void *> ptrs;
  ptrs.reserve(n);
  // Warm up the runtime (context, the shim's initialisation) first.
  void *w = nullptr;
  cudaMalloc(&w, 512);
  cudaFree(w);
  long before = rss_kib();
  for (uint64_t i = 0; i < n; ++i) {
    AllocReq r{512, nullptr};
    bench::at_depth(10, do_alloc, &r);
    if (!r.ptr) {
      std::fprintf(stderr, "bench_workload: cudaMalloc failed after %llu\n", (unsigned long long)i);
      return 1;
    }
    ptrs.push_back(r.ptr);
  }
  long after = rss_kib();
  for (void *p : ptrs) cudaFree(p);
  std::printf("{\"mode\":\"live\",\"live\":%llu,\"rss_before_kib\":%ld,\"rss_after_kib\":%ld}\n",
              (unsigned long long)n, before, after);
  return 0;
}

struct PairsCtx {
  uint64_t n;
};

void pairs_loop(void *p) {
  uint64_t n = static_cast<PairsCtx *>(p)->n;
  for (uint64_t i = 0; i < n; ++i) {
    void *ptr = nullptr;
    if (cudaMalloc(&ptr, 256) != cudaSuccess) std::abort();
    asm volatile("" : : "r"(ptr) : "memory");
    cudaFree(ptr);
  }
}

// Fixed-count pairs at a call depth: for callgrind (instructions per pair).
int pairs(uint64_t n, int depth) {
  PairsCtx warm{100};
  bench::at_depth(depth, pairs_loop, &warm);
  PairsCtx c{n};
  bench::at_depth(depth, pairs_loop, &c);
  std::printf("{\"mode\":\"pairs\",\"pairs\":%llu,\"depth\":%d}\n", (unsigned long long)n, depth);
  return 0;
}

}  // namespace

int steps_main(int argc, char **argv);  // bench/workload_steps.cpp

int main(int argc, char **argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: bench_workload mixed|live N | pairs N DEPTH | steps N --seed S ...\n");
    return 2;
  }
  if (!std::strcmp(argv[1], "steps")) return steps_main(argc, argv);
  uint64_t n = std::strtoull(argv[2], nullptr, 10);
  if (!std::strcmp(argv[1], "mixed")) return mixed(n);
  if (!std::strcmp(argv[1], "live")) return live(n);
  if (!std::strcmp(argv[1], "pairs")) return pairs(n, argc > 3 ? std::atoi(argv[3]) : 30);
  std::fprintf(stderr, "bench_workload: unknown mode %s\n", argv[1]);
  return 2;
}
