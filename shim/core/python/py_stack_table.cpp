#include "shim/core/python/py_stack_table.h"

#include <cstring>

namespace torchseal::py {

uint64_t PyStackTable::hash(const LocId *ids, size_t n) {
  uint64_t h = 0x243f6a8885a308d3ULL ^ n;
  for (size_t i = 0; i < n; ++i) h = mix64(h ^ ids[i]) + 0x632be59bd9b4e019ULL;
  return h;
}

PyStackId PyStackTable::intern(const LocId *ids, size_t n, uint64_t h) {
  if (n == 0) return 0;
  Guard g(lock_);
  auto [lo, hi] = by_hash_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const Entry &e = entries_[it->second - 1];
    if (e.len == n && std::memcmp(&ids_[e.offset], ids, n * sizeof(LocId)) == 0) return it->second;
  }
  entries_.push_back({static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n)});
  ids_.insert(ids_.end(), ids, ids + n);
  auto id = static_cast<PyStackId>(entries_.size());
  by_hash_.emplace(h, id);
  return id;
}

uint64_t PyStackTable::copy_since(uint64_t from, std::vector<std::vector<LocId>> &out) {
  Guard g(lock_);
  for (uint64_t i = from; i < entries_.size(); ++i) {
    const Entry &e = entries_[i];
    out.emplace_back(ids_.begin() + e.offset, ids_.begin() + e.offset + e.len);
  }
  return entries_.size();
}

}  // namespace torchseal::py
