#include "common/model/vmm_maps.h"

#include <algorithm>
#include <iterator>

namespace torchseal {

void VmmMapTable::apply(Op op, uint64_t va, uint64_t size, uint64_t handle,
                        std::vector<uint64_t> *gone, StackId stack, PyStackId pystack) {
  if (!size) return;
  if (op == Op::Map) map(va, size, handle, stack, pystack);
  if (op == Op::Unmap) unmap(va, size, gone);
}

bool VmmMapTable::release(uint64_t handle) {
  if (!mapped(handle)) return true;
  released_.insert(handle);
  return false;
}

void VmmMapTable::add(const VmmMap &m) {
  by_va_[m.va] = m;
  ++maps_of_[m.handle];
}

void VmmMapTable::drop(const VmmMap &m, std::vector<uint64_t> *gone) {
  auto it = maps_of_.find(m.handle);
  if (it == maps_of_.end() || --it->second) return;
  maps_of_.erase(it);
  if (released_.erase(m.handle) && gone) gone->push_back(m.handle);
}

void VmmMapTable::map(uint64_t va, uint64_t size, uint64_t handle, StackId stack,
                      PyStackId pystack) {
  // The driver refuses to map over a mapping: one still here is one whose
  // unmap we did not see, and the new mapping is the truth.
  unmap(va, size, nullptr);
  add({va, size, handle, stack, pystack});
}

void VmmMapTable::unmap(uint64_t va, uint64_t size, std::vector<uint64_t> *gone) {
  const uint64_t end = va + size;
  auto it = by_va_.upper_bound(va);
  if (it != by_va_.begin() && std::prev(it)->second.va + std::prev(it)->second.size > va) --it;
  std::vector<VmmMap> kept, dropped;
  while (it != by_va_.end() && it->second.va < end) {
    const VmmMap m = it->second;
    it = by_va_.erase(it);
    dropped.push_back(m);
    if (m.va < va) kept.push_back({m.va, va - m.va, m.handle, m.stack, m.pystack});
    if (m.va + m.size > end)
      kept.push_back({end, m.va + m.size - end, m.handle, m.stack, m.pystack});
  }
  // The parts kept first: a handle partly unmapped is still mapped.
  for (const VmmMap &m : kept) add(m);
  for (const VmmMap &m : dropped) drop(m, gone);
}

std::vector<VmmMap> VmmMapTable::list() const {
  std::vector<VmmMap> out;
  out.reserve(by_va_.size());
  for (const auto &[va, m] : by_va_) out.push_back(m);
  return out;
}

std::vector<uint64_t> VmmMapTable::released() const {
  std::vector<uint64_t> out(released_.begin(), released_.end());
  std::sort(out.begin(), out.end());
  return out;
}

void VmmMapTable::restore_released(const std::vector<uint64_t> &handles) {
  for (uint64_t h : handles)
    if (mapped(h)) released_.insert(h);
}

void note_map_sites(const VmmMapTable &maps, std::vector<LiveAlloc> &live) {
  std::unordered_map<uint64_t, VmmMap> first;
  for (const VmmMap &m : maps.list()) first.emplace(m.handle, m);
  if (first.empty()) return;
  for (LiveAlloc &a : live) {
    if (a.family != Family::Vmm) continue;
    auto it = first.find(a.addr);
    if (it == first.end()) continue;
    a.map_stack = it->second.stack;
    a.map_pystack = it->second.pystack;
  }
}

}  // namespace torchseal
