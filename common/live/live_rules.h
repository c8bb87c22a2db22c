// The rules of what is live that the shim's recorder (its sharded tables,
// shim/core/recorder.cpp) and every replay of a history (LiveSet,
// common/live/live_set.h) must apply alike, or a report read from the
// history would differ from the one the process wrote. The tables differ
// (the recorder's are lock-sharded for the allocation path), the rules are
// these. The VMM lifetime rule is VmmMapTable's (vmm_maps.h), the bounds on
// the run's lists are run_summary.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/model/analysis_input.h"

namespace torchseal::live {

// A context teardown (cuCtxDestroy, cudaDeviceReset) ends the allocations of
// its context when it names one, else those of its device, else (device < 0)
// those of every device.
inline bool ends_at_teardown(uint32_t teardown_context, int teardown_device, uint32_t alloc_context,
                             int alloc_device) {
  return teardown_context ? alloc_context == teardown_context
                          : (teardown_device < 0 || alloc_device == teardown_device);
}

// A step sample's sites: the live allocations grouped by (native stack,
// Python stack, API), in the order first seen. An OOM's snapshot groups by
// stacks only (SiteTally): the two answer different questions.
class StepSites {
 public:
  void add(StackId stack, PyStackId pystack, ApiId api, Family family, uint64_t size) {
    auto [it, fresh] =
        index_.emplace(Key{static_cast<uint64_t>(stack) << 32 | pystack, api}, sites_.size());
    if (fresh) sites_.push_back({stack, pystack, api, family, 0, 0});
    sites_[it->second].bytes += size;
    sites_[it->second].allocations += 1;
  }
  std::vector<SiteSample> take() { return std::move(sites_); }

 private:
  struct Key {
    uint64_t stacks;
    ApiId api;
    bool operator==(const Key &o) const { return stacks == o.stacks && api == o.api; }
  };
  struct Hash {
    size_t operator()(const Key &k) const {
      uint64_t x = k.stacks ^ (static_cast<uint64_t>(k.api) * 0x9e3779b97f4a7c15ull);
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      return static_cast<size_t>(x ^ (x >> 29));
    }
  };
  std::unordered_map<Key, size_t, Hash> index_;
  std::vector<SiteSample> sites_;
};

}  // namespace torchseal::live
