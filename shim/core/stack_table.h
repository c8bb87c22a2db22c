// Interned native stacks (heaptrack's trace interning): every distinct IP
// sequence is stored once and named by a 32-bit StackId. Sharded by hash, so
// threads interning different stacks rarely meet on a lock, and a small
// per-thread cache answers the common case (same call site again) lock-free.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model/event.h"
#include "shim/core/shard_lock.h"

namespace torchseal {

class StackTable {
 public:
  static constexpr int kShardBits = 6;
  static constexpr int kShards = 1 << kShardBits;

  StackTable();
  StackId intern(const uint64_t *ips, int n);
  // Same, with `hash` = hash_ips(ips, n) (ip_hash.h) already known.
  StackId intern(const uint64_t *ips, int n, uint64_t hash);

  // Copies every stack out, indexed by StackId (index 0 is the empty stack).
  void export_all(std::vector<std::vector<uint64_t>> &out);

  size_t count();

  // Calls fn(id, ips, n) for every stack interned since `cursor` (one counter
  // per shard, advanced in place): how the history writer emits only new ones.
  template <typename Fn>
  void for_each_since(uint32_t (&cursor)[kShards], Fn &&fn) {
    for (uint32_t sh = 0; sh < kShards; ++sh) {
      Shard &s = shards_[sh];
      Guard g(s.lock);
      for (uint32_t local = cursor[sh]; local < s.entries.size(); ++local) {
        const Entry &e = s.entries[local];
        fn(((local << kShardBits) | sh) + 1, &s.ips[e.offset], e.len);
      }
      cursor[sh] = static_cast<uint32_t>(s.entries.size());
    }
  }
  void reset_locks_after_fork();

 private:
  struct Entry {
    uint64_t hash;
    uint32_t offset;  // into Shard::ips
    uint32_t len;
  };
  struct alignas(64) Shard {  // own cache line: no false sharing of lock words
    ShardLock lock;
    std::vector<uint64_t> ips;
    std::vector<Entry> entries;   // index = local id
    std::vector<uint32_t> slots;  // open addressing: local id + 1, 0 = empty
  };
  uint32_t generation_;  // per-thread caches hold ids of one table generation only
  static void grow(Shard &s);
  // A miss of the thread's cache.
  StackId find_or_add(const uint64_t *ips, int n, uint64_t h);

  Shard shards_[kShards];
};

}  // namespace torchseal
