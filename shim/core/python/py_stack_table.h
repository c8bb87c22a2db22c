// Interned Python stacks: each distinct sequence of LocIds (innermost first)
// is stored once and named by a dense PyStackId (1, 2, 3, ...; 0 = empty), so
// reports index a vector by id and the history writer follows one cursor.
// New stacks are rare after warm-up (the capture path's per-thread cache
// answers repeats), so one lock is enough here.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/model/event.h"  // PyStackId
#include "shim/core/python/code_locations.h"
#include "shim/core/shard_lock.h"

namespace torchseal::py {

class PyStackTable {
 public:
  static uint64_t hash(const LocId *ids, size_t n);

  PyStackId intern(const LocId *ids, size_t n, uint64_t h);

  // Copies the LocId sequences of ids [from, size()) out and returns size().
  uint64_t copy_since(uint64_t from, std::vector<std::vector<LocId>> &out);

  void reset_locks_after_fork() { lock_.reset_after_fork(); }

 private:
  struct Entry {
    uint32_t offset, len;  // into ids_
  };
  ShardLock lock_;
  std::vector<LocId> ids_;
  std::vector<Entry> entries_;  // PyStackId - 1 -> Entry
  std::unordered_multimap<uint64_t, PyStackId> by_hash_;
};

}  // namespace torchseal::py
