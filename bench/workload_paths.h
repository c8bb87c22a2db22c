// The call paths bench_workload allocates from: kPaths distinct functions,
// each reachable at depths 1..kDepths, so path x depth gives up to
// kPaths * kDepths distinct stacks that symbolize to distinct sites.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <utility>

#include "common.h"

namespace bench {

struct AllocReq {
  size_t size;
  void *ptr;
};

inline void do_alloc(void *p) {
  auto *r = static_cast<AllocReq *>(p);
  if (cudaMalloc(&r->ptr, r->size) != cudaSuccess) r->ptr = nullptr;
}

// Each instantiation is its own function, so the return address it leaves
// on the stack differs.
template <int K>
__attribute__((noinline)) void path(int depth, AllocReq *r) {
  at_depth(depth, do_alloc, r);
  asm volatile("" ::: "memory");
}
template <int... K>
constexpr auto make_paths(std::integer_sequence<int, K...>) {
  return std::array<void (*)(int, AllocReq *), sizeof...(K)>{&path<K>...};
}
constexpr int kPaths = 100;
constexpr int kDepths = 50;
inline const auto kPathTable = make_paths(std::make_integer_sequence<int, kPaths>{});

// Site `site` (0 <= site < kPaths * kDepths): its path and depth.
inline void alloc_at_site(int site, AllocReq *r) {
  kPathTable[site % kPaths](1 + site / kPaths, r);
}

// Log-uniform over [lo, hi] bytes, rounded up to 512.
inline size_t draw_size(Rng &rng, double lo, double hi) {
  double v = std::exp(std::log(lo) + (std::log(hi) - std::log(lo)) * rng.uniform());
  size_t s = (static_cast<size_t>(v) + 511) & ~size_t(511);
  return s ? s : 512;
}

}  // namespace bench
