#include "shim/core/live_table.h"

namespace torchseal {

void LiveTable::grow(Shard &s) {
  size_t cap = s.slots.empty() ? 16 : s.slots.size() * 2;
  MappedArray<LiveRecord> slots(cap);
  for (const LiveRecord &r : s.slots) {
    if (!r.addr) continue;
    size_t i = home(r.addr, cap - 1);
    while (slots[i].addr) i = (i + 1) & (cap - 1);
    slots[i] = r;
  }
  s.slots.swap(slots);
}

bool LiveTable::insert(const LiveRecord &r, LiveRecord *replaced) {
  uint64_t mixed = mix64(r.addr);
  Shard &s = shard_of_mix(shards_, mixed);
  Guard g(s.lock);
  // Keep the load factor under 3/4 so probes stay short.
  if ((s.used + 1) * 4 >= s.slots.size() * 3) grow(s);
  size_t mask = s.slots.size() - 1;
  size_t i = home_of_mix(mixed, mask);
  while (s.slots[i].addr) {
    if (s.slots[i].addr == r.addr) {
      if (replaced) *replaced = s.slots[i];
      s.slots[i] = r;
      return false;
    }
    i = (i + 1) & mask;
  }
  s.slots[i] = r;
  ++s.used;
  return true;
}

void LiveTable::erase_at(Shard &s, size_t i) {
  // Backward-shift deletion: no tombstones, so lookups never slow down.
  size_t mask = s.slots.size() - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (!s.slots[j].addr) break;
    size_t k = home(s.slots[j].addr, mask);
    // Move slots[j] into the hole at i unless its home lies cyclically in (i, j].
    bool in_range = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (!in_range) {
      s.slots[i] = s.slots[j];
      i = j;
    }
  }
  s.slots[i] = LiveRecord{};
  --s.used;
}

bool LiveTable::remove(uint64_t addr, LiveRecord *out) {
  if (!addr) return false;
  uint64_t mixed = mix64(addr);
  Shard &s = shard_of_mix(shards_, mixed);
  Guard g(s.lock);
  if (s.slots.empty()) return false;
  size_t mask = s.slots.size() - 1;
  for (size_t i = home_of_mix(mixed, mask); s.slots[i].addr; i = (i + 1) & mask) {
    if (s.slots[i].addr == addr) {
      if (out) *out = s.slots[i];
      if (s.slots[(i + 1) & mask].addr) {
        erase_at(s, i);
      } else {  // nothing to shift back: the common case, inline
        s.slots[i] = LiveRecord{};
        --s.used;
      }
      return true;
    }
  }
  return false;
}

bool LiveTable::find(uint64_t addr, LiveRecord *out) {
  if (!addr) return false;
  Shard &s = shard_for(shards_, addr);
  Guard g(s.lock);
  if (s.slots.empty()) return false;
  size_t mask = s.slots.size() - 1;
  for (size_t i = home(addr, mask); s.slots[i].addr; i = (i + 1) & mask)
    if (s.slots[i].addr == addr) {
      if (out) *out = s.slots[i];
      return true;
    }
  return false;
}

void LiveTable::for_each(const std::function<void(const LiveRecord &)> &fn) {
  for (Shard &s : shards_) {
    Guard g(s.lock);
    for (const LiveRecord &r : s.slots)
      if (r.addr) fn(r);
  }
}

void LiveTable::remove_if(const std::function<bool(const LiveRecord &)> &pred,
                          const std::function<void(const LiveRecord &)> &take) {
  for (Shard &s : shards_) {
    Guard g(s.lock);
    std::vector<LiveRecord> keep;
    keep.reserve(s.used);
    for (const LiveRecord &r : s.slots) {
      if (!r.addr) continue;
      if (pred(r))
        take(r);
      else
        keep.push_back(r);
    }
    if (keep.size() == s.used) continue;
    MappedArray<LiveRecord>(s.slots.size()).swap(s.slots);
    s.used = 0;
    size_t mask = s.slots.size() - 1;
    for (const LiveRecord &r : keep) {
      size_t i = home(r.addr, mask);
      while (s.slots[i].addr) i = (i + 1) & mask;
      s.slots[i] = r;
      ++s.used;
    }
  }
}

void LiveTable::clear() {
  for (Shard &s : shards_) {
    Guard g(s.lock);
    MappedArray<LiveRecord>().swap(s.slots);
    s.used = 0;
  }
}

size_t LiveTable::size() {
  size_t n = 0;
  for (Shard &s : shards_) {
    Guard g(s.lock);
    n += s.used;
  }
  return n;
}

void LiveTable::reset_locks_after_fork() {
  for (Shard &s : shards_) s.lock.reset_after_fork();
}

}  // namespace torchseal
