#include "shim/core/python/code_locations.h"

namespace torchseal::py {

LocId LocationTable::resolve(const Interp &in, const PositionKey &key) {
  PositionShard &s = shards_[key.hash() >> 60];
  {
    Guard g(s.lock);
    auto it = s.map.find(key);
    if (it != s.map.end()) return it->second;
  }
  // Decode outside the shard lock: it copies strings and walks a line table.
  DecodedLocation d;
  if (!decode_location(in, key.code, key.offset, d)) return 0;
  LocId id = intern(d);
  Guard g(s.lock);
  if (s.map.size() >= kMaxPositionsPerShard) s.map.clear();
  s.map.emplace(key, id);
  return id;
}

uint32_t LocationTable::intern_string(const std::string &s) {
  auto [it, fresh] = string_ids_.try_emplace(s, static_cast<uint32_t>(strings_.size()));
  if (fresh) strings_.push_back(&it->first);
  return it->second;
}

LocId LocationTable::intern(const DecodedLocation &d) {
  Guard g(intern_lock_);
  Loc l{intern_string(d.function), intern_string(d.file), d.line};
  auto [it, fresh] = loc_ids_.try_emplace(l, static_cast<LocId>(locs_.size() + 1));
  if (fresh) locs_.push_back(l);
  return it->second;
}

LocId LocationTable::intern_label(const std::string &function) {
  DecodedLocation d;
  d.function = function;
  return intern(d);
}

void LocationTable::frames(const LocId *ids, size_t n, std::vector<PyFrame> &out) {
  Guard g(intern_lock_);
  for (size_t i = 0; i < n; ++i) {
    PyFrame f;
    if (ids[i] && ids[i] <= locs_.size()) {
      const Loc &l = locs_[ids[i] - 1];
      f.function = *strings_[l.function];
      f.file = *strings_[l.file];
      f.line = l.line;
    }
    out.push_back(std::move(f));
  }
}

void LocationTable::reset_locks_after_fork() {
  for (auto &s : shards_) s.lock.reset_after_fork();
  intern_lock_.reset_after_fork();
}

}  // namespace torchseal::py
