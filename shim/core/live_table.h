// Live allocations: address -> record, sharded by address hash so concurrent
// threads rarely share a lock. Open addressing with tombstone-free backward
// shift deletion keeps a live allocation at 48 bytes of slot plus load slack.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "common/model/analysis_input.h"
#include "shim/core/mapped_array.h"
#include "shim/core/shard_lock.h"

namespace torchseal {

struct LiveRecord {
  uint64_t addr;  // 0 marks an empty slot (CUDA never returns a null allocation)
  uint64_t size;
  StackId stack;
  PyStackId pystack;
  ApiId api;
  Family family;
  int8_t device;
  uint32_t context;  // small context id, for teardown
};
// A live allocation costs its record over the table's load factor (bench (f)).
static_assert(sizeof(LiveRecord) == 32);

class LiveTable {
 public:
  static constexpr int kShardBits = 6;
  static constexpr int kShards = 1 << kShardBits;

  // Inserts; if the address is already live (a missed free), the old record is
  // replaced and returned through `replaced` so the caller can account for it.
  bool insert(const LiveRecord &r, LiveRecord *replaced);
  // Removes and returns the record for `addr`; false if it is not live.
  bool remove(uint64_t addr, LiveRecord *out);
  bool find(uint64_t addr, LiveRecord *out);

  // Visits every live record (each shard locked in turn).
  void for_each(const std::function<void(const LiveRecord &)> &fn);
  // Removes every record for which `pred` is true, passing each to `take`.
  void remove_if(const std::function<bool(const LiveRecord &)> &pred,
                 const std::function<void(const LiveRecord &)> &take);
  void clear();
  size_t size();
  void reset_locks_after_fork();

 private:
  struct alignas(64) Shard {  // own cache line: no false sharing of lock words
    ShardLock lock;
    MappedArray<LiveRecord> slots;
    size_t used = 0;
  };
  // One mix per address: its low bits pick the shard, the rest the slot.
  static size_t home_of_mix(uint64_t mixed, size_t mask) { return (mixed >> kShardBits) & mask; }
  static size_t home(uint64_t addr, size_t mask) { return home_of_mix(mix64(addr), mask); }
  static Shard &shard_of_mix(Shard *shards, uint64_t mixed) {
    return shards[mixed & (kShards - 1)];
  }
  static Shard &shard_for(Shard *shards, uint64_t addr) {
    return shard_of_mix(shards, mix64(addr));
  }
  static void grow(Shard &s);
  static void erase_at(Shard &s, size_t i);

  Shard shards_[kShards];
};

}  // namespace torchseal
