#include "report/model/vmm_maps.h"

#include <iterator>

namespace torchseal {

void VmmMapTable::apply(Op op, uint64_t va, uint64_t size, uint64_t handle) {
  if (!size) return;
  if (op == Op::Map) map(va, size, handle);
  if (op == Op::Unmap) unmap(va, size);
}

void VmmMapTable::map(uint64_t va, uint64_t size, uint64_t handle) {
  // The driver refuses to map over a mapping: one still here is one whose
  // unmap we did not see, and the new mapping is the truth.
  unmap(va, size);
  by_va_[va] = {va, size, handle};
}

void VmmMapTable::unmap(uint64_t va, uint64_t size) {
  const uint64_t end = va + size;
  auto it = by_va_.upper_bound(va);
  if (it != by_va_.begin() && std::prev(it)->second.va + std::prev(it)->second.size > va) --it;
  std::vector<VmmMap> kept;
  while (it != by_va_.end() && it->second.va < end) {
    const VmmMap m = it->second;
    it = by_va_.erase(it);
    if (m.va < va) kept.push_back({m.va, va - m.va, m.handle});
    if (m.va + m.size > end) kept.push_back({end, m.va + m.size - end, m.handle});
  }
  for (const VmmMap &m : kept) by_va_[m.va] = m;
}

std::vector<VmmMap> VmmMapTable::list() const {
  std::vector<VmmMap> out;
  out.reserve(by_va_.size());
  for (const auto &[va, m] : by_va_) out.push_back(m);
  return out;
}

}  // namespace torchseal
