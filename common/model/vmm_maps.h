// The VMM mappings in force, and the lifetime rule of physical memory that
// CUDA defines on them: a cuMemCreate handle's memory lives while the handle
// is unreleased or any mapping of it remains (cuMemRelease of a mapped
// handle frees it at its last cuMemUnmap). PyTorch's expandable segments
// carve tensors out of such ranges, so a tensor's address names its handle
// only through them. The shim's recorder and the history replay both keep
// their mappings and releases here, so they free the same handles at the
// same event and export the same set.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/model/analysis_input.h"

namespace torchseal {

class VmmMapTable {
 public:
  // Op::Map and Op::Unmap change the table; other ops (reservations) do not.
  // An unmap appends to `gone` each released handle it took the last mapping
  // of: its physical memory is freed now.
  void apply(Op op, uint64_t va, uint64_t size, uint64_t handle,
             std::vector<uint64_t> *gone = nullptr, StackId stack = 0, PyStackId pystack = 0);
  // cuMemRelease of `handle`: true when its memory goes now (no mapping
  // holds it); false when a mapping keeps it alive until its last unmap.
  bool release(uint64_t handle);
  // The release failed after all (the handle is the program's again).
  void unrelease(uint64_t handle) { released_.erase(handle); }
  // The handle ended otherwise (context teardown): forget its release.
  void forget(uint64_t handle) { released_.erase(handle); }
  bool mapped(uint64_t handle) const { return maps_of_.count(handle) != 0; }
  bool is_released(uint64_t handle) const { return released_.count(handle) != 0; }
  // Ascending by address.
  std::vector<VmmMap> list() const;
  // Released handles that mappings keep alive (a checkpoint carries them).
  std::vector<uint64_t> released() const;
  void restore_released(const std::vector<uint64_t> &handles);

 private:
  void map(uint64_t va, uint64_t size, uint64_t handle, StackId stack, PyStackId pystack);
  // Unmaps [va, va + size) from every mapping it overlaps; the parts of a
  // mapping outside it stay mapped.
  void unmap(uint64_t va, uint64_t size, std::vector<uint64_t> *gone);
  void add(const VmmMap &m);
  void drop(const VmmMap &m, std::vector<uint64_t> *gone);

  std::map<uint64_t, VmmMap> by_va_;                // keyed by VmmMap::va; ranges never overlap
  std::unordered_map<uint64_t, uint32_t> maps_of_;  // handle -> mappings of it
  std::unordered_set<uint64_t> released_;           // released, still mapped
};

// Names, on each live VMM handle in `live`, the cuMemMap that still maps it.
void note_map_sites(const VmmMapTable &maps, std::vector<LiveAlloc> &live);

}  // namespace torchseal
