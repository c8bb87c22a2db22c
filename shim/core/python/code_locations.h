// Python code locations (function, file, line), interned once each and named
// by a 32-bit LocId, plus the cache that maps a live frame position
// (code object, byte offset, fingerprint) to its LocId so the line table and
// strings are decoded once per call site, not once per event.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model/analysis_input.h"  // PyFrame
#include "shim/core/python/code_reader.h"
#include "shim/core/shard_lock.h"

namespace torchseal::py {

using LocId = uint32_t;  // 1-based; 0 = none

// What identifies a frame position while the code object is alive.
struct PositionKey {
  uintptr_t code;
  int64_t offset;
  uint64_t fingerprint;  // code_fingerprint(): detects address reuse
  bool operator==(const PositionKey &) const = default;
  uint64_t hash() const {
    return mix64(fingerprint ^ (static_cast<uint64_t>(offset) * 0x9e3779b97f4a7c15ULL));
  }
};

class LocationTable {
 public:
  // The LocId of a position, decoding it on first sight. The code object
  // must be alive (its frame on the calling thread's stack). 0 if it cannot
  // be read.
  LocId resolve(const Interp &in, const PositionKey &key);

  // A frame that is not code: (function, "", 0), such as the autograd node
  // a borrowed stack was captured for.
  LocId intern_label(const std::string &function);

  // Appends the frames for `ids` (unknown ids give an empty frame).
  void frames(const LocId *ids, size_t n, std::vector<PyFrame> &out);

  void reset_locks_after_fork();

 private:
  static constexpr int kShards = 16;
  // Positions are keyed by code address; in a program that keeps creating
  // code (exec, generated code) they accumulate, so a shard is simply
  // emptied when it grows past this. Interned locations are never dropped.
  static constexpr size_t kMaxPositionsPerShard = 1 << 16;

  struct KeyHash {
    size_t operator()(const PositionKey &k) const { return k.hash(); }
  };
  struct PositionShard {
    ShardLock lock;
    std::unordered_map<PositionKey, LocId, KeyHash> map;
  };
  struct Loc {
    uint32_t function, file;  // string ids
    int32_t line;
    bool operator==(const Loc &) const = default;
  };
  struct LocHash {
    size_t operator()(const Loc &l) const {
      return mix64((uint64_t{l.function} << 32 | l.file) ^ (uint64_t(uint32_t(l.line)) << 17));
    }
  };

  LocId intern(const DecodedLocation &d);
  uint32_t intern_string(const std::string &s);  // under intern_lock_

  PositionShard shards_[kShards];
  ShardLock intern_lock_;
  std::unordered_map<std::string, uint32_t> string_ids_;
  std::vector<const std::string *> strings_;  // id -> key inside string_ids_ (stable)
  std::unordered_map<Loc, LocId, LocHash> loc_ids_;
  std::vector<Loc> locs_;  // LocId - 1 -> Loc
};

}  // namespace torchseal::py
