// The hash that names a native stack: one xor-multiply per return address,
// then a full mix. Each step is a bijection of the running value and of the
// address, so stacks that differ in one frame hash differently before the
// final `| 1`. The walker computes it frame by frame alongside its own loads
// (the multiply chain hides behind them), so interning never reads the
// stack a second time.
#pragma once

#include <cstdint>

#include "shim/core/shard_lock.h"

namespace torchseal {

class IpHasher {
 public:
  void add(uint64_t ip) { h_ = (h_ ^ ip) * 0x9e3779b97f4a7c15ULL; }
  // Never 0, so an empty cache slot never matches.
  uint64_t finish(int n) const { return mix64(h_ ^ static_cast<uint64_t>(n)) | 1; }

 private:
  uint64_t h_ = 0x243f6a8885a308d3ULL;
};

inline uint64_t hash_ips(const uint64_t *ips, int n) {
  IpHasher h;
  for (int i = 0; i < n; ++i) h.add(ips[i]);
  return h.finish(n);
}

}  // namespace torchseal
