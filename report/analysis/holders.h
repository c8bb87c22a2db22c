// Who holds the live memory of a Python process (docs/report-format.md): the
// holder scan gives CUDA storages (address, bytes) and the referrer chain
// that reached each; here each storage is placed in the live allocation that
// contains it (the exact block in tensors mode, the segment the caching
// allocator carved it from otherwise, the VMM handle mapped where it lies
// with expandable segments) and chains are totalled per entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/util/fork_safe.h"

namespace torchseal {

// Per chain index: (bytes, tensors) held through it.
using HolderTotals = std::map<uint32_t, std::pair<uint64_t, uint64_t>>;

class HeldMap {
 public:
  explicit HeldMap(const AnalysisInput &in);
  // Whether a storage the scan found lies inside in.live[i].
  bool held(size_t live_index) const {
    return live_index < per_live_.size() && !per_live_[live_index].empty();
  }
  // Adds the storages inside in.live[i] to `totals`.
  void add(size_t live_index, HolderTotals &totals) const;
  // The bytes and count of the storages inside in.live[i].
  std::pair<uint64_t, uint64_t> held_bytes(size_t live_index) const;
  // The indexes (into the scan's storages) of those inside in.live[i].
  const std::vector<uint32_t> &storages_in(size_t live_index) const {
    static constinit Lazy<const std::vector<uint32_t>> none;
    return held(live_index) ? per_live_[live_index] : none.get();
  }

 private:
  const HolderScan &scan_;
  std::vector<std::vector<uint32_t>> per_live_;  // storage indexes per live allocation
};

// Holders largest first, at most `limit` of them.
std::vector<Holder> holders_from(const HolderTotals &totals, const HolderScan &scan,
                                 size_t limit = 8);

// Per allocation site (stack, Python stack, API, family) of in.live: the
// holders of the storages in.holders places inside it. Sites nothing holds
// are left out.
std::vector<SiteHolders> holders_by_site(const AnalysisInput &in, size_t limit = 8);

// Every storage of a scan, by chain (an OOM's view: what held the memory).
std::vector<Holder> all_holders(const HolderScan &scan, size_t limit = 8);

}  // namespace torchseal
