// Shared helpers for torchseal's benchmarks: a call-depth driver that keeps
// every level a real frame (no inlining, no tail calls).
#pragma once

#include <cstdint>

namespace bench {

using Leaf = void (*)(void *ctx);

// Calls leaf(ctx) from `depth` nested frames of this function.
__attribute__((noinline)) inline void at_depth(int depth, Leaf leaf, void *ctx) {
  if (depth <= 1) {
    leaf(ctx);
  } else {
    at_depth(depth - 1, leaf, ctx);
  }
  asm volatile("" ::: "memory");  // the call above is not a tail call
}

// Small, fast xorshift PRNG (deterministic across runs).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9e3779b97f4a7c15ULL | 1) {}
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
};

}  // namespace bench
