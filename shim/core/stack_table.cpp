#include "shim/core/stack_table.h"

#include "shim/core/ip_hash.h"
#include "shim/core/thread_heap.h"

#include <atomic>
#include <cstring>

namespace torchseal {

namespace {
// Last-seen stacks of this thread, keyed by full 64-bit hash. Loops allocate
// from the same site over and over; this skips the shard lock for them.
constexpr int kCacheSize = 64;
struct CacheEntry {
  uint64_t hash;
  StackId id;
  uint32_t generation;
};
std::atomic<uint32_t> g_generations{0};
// Per thread, on the heap (thread_heap.h): 1 KiB.
struct Cache {
  CacheEntry e[kCacheSize];  // zeroed: generation 0 matches no table
};
using ThreadCache = ThreadHeap<Cache>;

StackId make_id(uint32_t shard, uint32_t local) {
  return ((local << StackTable::kShardBits) | shard) + 1;
}
}  // namespace

// A new table (a forked child starts one) gets a new generation, so ids
// cached by the forking thread for the old table are never returned.
StackTable::StackTable() : generation_(g_generations.fetch_add(1) + 1) {}

void StackTable::grow(Shard &s) {
  size_t cap = s.slots.empty() ? 64 : s.slots.size() * 2;
  std::vector<uint32_t> slots(cap, 0);
  for (uint32_t local = 0; local < s.entries.size(); ++local) {
    size_t i = s.entries[local].hash & (cap - 1);
    while (slots[i]) i = (i + 1) & (cap - 1);
    slots[i] = local + 1;
  }
  s.slots.swap(slots);
}

StackId StackTable::intern(const uint64_t *ips, int n) {
  return n > 0 ? intern(ips, n, hash_ips(ips, n)) : 0;
}

// The cache's answer without the shared table's frame: a repeated stack,
// most of them, costs no register saves (a third of an intern's
// instructions when it hit).
StackId StackTable::intern(const uint64_t *ips, int n, uint64_t h) {
  if (n <= 0) return 0;
  if (const Cache *cache = ThreadCache::get()) {
    const CacheEntry &c = cache->e[(h >> 20) & (kCacheSize - 1)];
    if (c.hash == h && c.generation == generation_) return c.id;
  }
  return find_or_add(ips, n, h);
}

// The shared table, then the thread's cache entry.
__attribute__((noinline)) StackId StackTable::find_or_add(const uint64_t *ips, int n, uint64_t h) {
  uint32_t shard_no = static_cast<uint32_t>(h >> (64 - kShardBits));
  Shard &s = shards_[shard_no];
  StackId id;
  {
    Guard g(s.lock);
    if (s.entries.size() * 2 >= s.slots.size()) grow(s);
    size_t mask = s.slots.size() - 1;
    size_t i = h & mask;
    for (;;) {
      uint32_t slot = s.slots[i];
      if (!slot) {
        uint32_t local = static_cast<uint32_t>(s.entries.size());
        s.entries.push_back({h, static_cast<uint32_t>(s.ips.size()), static_cast<uint32_t>(n)});
        s.ips.insert(s.ips.end(), ips, ips + n);
        s.slots[i] = local + 1;
        id = make_id(shard_no, local);
        break;
      }
      const Entry &e = s.entries[slot - 1];
      if (e.hash == h && e.len == static_cast<uint32_t>(n) &&
          memcmp(&s.ips[e.offset], ips, n * sizeof(uint64_t)) == 0) {
        id = make_id(shard_no, slot - 1);
        break;
      }
      i = (i + 1) & mask;
    }
  }
  if (Cache *cache = ThreadCache::get_or_make()) {
    CacheEntry &c = cache->e[(h >> 20) & (kCacheSize - 1)];
    c.hash = h;
    c.id = id;
    c.generation = generation_;
  }
  return id;
}

void StackTable::export_all(std::vector<std::vector<uint64_t>> &out) {
  size_t max_id = 0;
  for (uint32_t sh = 0; sh < kShards; ++sh) {
    Guard g(shards_[sh].lock);
    size_t n = shards_[sh].entries.size();
    if (n) max_id = std::max<size_t>(max_id, make_id(sh, static_cast<uint32_t>(n - 1)));
  }
  out.assign(max_id + 1, {});
  for (uint32_t sh = 0; sh < kShards; ++sh) {
    Shard &s = shards_[sh];
    Guard g(s.lock);
    for (uint32_t local = 0; local < s.entries.size(); ++local) {
      const Entry &e = s.entries[local];
      StackId id = make_id(sh, local);
      if (id < out.size())
        out[id].assign(s.ips.begin() + e.offset, s.ips.begin() + e.offset + e.len);
    }
  }
}

size_t StackTable::count() {
  size_t n = 0;
  for (auto &s : shards_) {
    Guard g(s.lock);
    n += s.entries.size();
  }
  return n;
}

void StackTable::reset_locks_after_fork() {
  for (auto &s : shards_) s.lock.reset_after_fork();
}

}  // namespace torchseal
