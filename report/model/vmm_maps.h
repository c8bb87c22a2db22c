// The VMM mappings in force: which cuMemCreate handle backs each mapped
// address range (cuMemMap adds one, cuMemUnmap removes one). PyTorch's
// expandable segments carve tensors out of such ranges, so a tensor's
// address names its handle only through them. The shim's recorder and the
// history replay both keep their mappings here, so they export the same set.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "report/model/analysis_input.h"

namespace torchseal {

class VmmMapTable {
 public:
  // Op::Map and Op::Unmap change the table; other ops (reservations) do not.
  void apply(Op op, uint64_t va, uint64_t size, uint64_t handle);
  // Ascending by address.
  std::vector<VmmMap> list() const;

 private:
  void map(uint64_t va, uint64_t size, uint64_t handle);
  // Unmaps [va, va + size) from every mapping it overlaps; the parts of a
  // mapping outside it stay mapped.
  void unmap(uint64_t va, uint64_t size);

  std::map<uint64_t, VmmMap> by_va_;  // keyed by VmmMap::va; ranges never overlap
};

}  // namespace torchseal
