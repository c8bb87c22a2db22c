#include "stack_table.h"

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
thread_local CacheEntry t_cache[kCacheSize] __attribute__((tls_model("initial-exec")));

StackId make_id(uint32_t shard, uint32_t local) {
  return ((local << StackTable::kShardBits) | shard) + 1;
}
}  // namespace

// A new table (a forked child starts one) gets a new generation, so ids
// cached by the forking thread for the old table are never returned.
StackTable::StackTable() : generation_(g_generations.fetch_add(1) + 1) {}

uint64_t StackTable::hash_ips(const uint64_t *ips, int n) {
  // Four independent lanes of xor-multiply: a chained full mix per frame was
  // a latency chain of ~13 cycles a frame, a fifth of the hot path at depth
  // 30 (bench/RESULTS.md). Each step is a bijection of its lane and of the
  // IP, so stacks that differ in one frame get different mixes; the final
  // mix spreads the lanes' high bits.
  constexpr uint64_t k = 0x9e3779b97f4a7c15ULL;
  uint64_t l0 = 0x243f6a8885a308d3ULL, l1 = 0x13198a2e03707344ULL, l2 = 0xa4093822299f31d0ULL,
           l3 = 0x082efa98ec4e6c89ULL;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    l0 = (l0 ^ ips[i]) * k;
    l1 = (l1 ^ ips[i + 1]) * k;
    l2 = (l2 ^ ips[i + 2]) * k;
    l3 = (l3 ^ ips[i + 3]) * k;
  }
  if (i < n) l0 = (l0 ^ ips[i]) * k;
  if (i + 1 < n) l1 = (l1 ^ ips[i + 1]) * k;
  if (i + 2 < n) l2 = (l2 ^ ips[i + 2]) * k;
  auto rotl = [](uint64_t x, int r) { return (x << r) | (x >> (64 - r)); };
  uint64_t h = mix64(l0 ^ rotl(l1, 16) ^ rotl(l2, 32) ^ rotl(l3, 48) ^ static_cast<uint64_t>(n));
  return h | 1;  // never 0, so an empty cache slot never matches
}

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
  if (n <= 0) return 0;
  uint64_t h = hash_ips(ips, n);
  CacheEntry &c = t_cache[(h >> 20) & (kCacheSize - 1)];
  if (c.hash == h && c.generation == generation_) return c.id;

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
  c.hash = h;
  c.id = id;
  c.generation = generation_;
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
