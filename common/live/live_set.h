// The live state of a run as its events leave it: what is allocated, by
// address, VMM handles by handle, and the mappings in force, with the rules
// of live_rules.h and vmm_maps.h (the recorder's): an allocation at a live
// address replaces the old one (reused without a recorded free), a free of
// an unknown address changes nothing, a VMM handle released while mapped
// lives until its last unmap, and a teardown ends the allocations of its
// context (else of its device, else of every device).
//
// Both users of a history's events keep it: the replay (report/replay), for
// every reader, and the shim's capped-history writer (shim/sink), for the
// checkpoints it writes as the events go by.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "common/model/event.h"
#include "common/model/vmm_maps.h"

namespace torchseal {

struct LiveEntry {
  Event alloc;       // the allocating event (address, size, stacks, device, context, thread)
  uint64_t tag = 0;  // the listener's own value for this allocation (on_alloc)
};

class LiveSet {
 public:
  // Hears of the changes an event makes, before the state changes.
  class Listener {
   public:
    virtual ~Listener() = default;
    // `e` allocated; the returned tag is kept with the entry.
    virtual uint64_t on_alloc(const Event & /*e*/) { return 0; }
    // `r` stops being live because of `e`: its Free, a new allocation at the
    // same address (reused without a recorded free), or an unmap that took
    // a released handle's last mapping.
    virtual void on_release(const Event & /*e*/, const LiveEntry & /*r*/) {}
    // A teardown ends `dying` (in table order; sort for a stable output).
    // By default, one on_release each.
    virtual void on_teardown(const Event &e, const std::vector<const LiveEntry *> &dying) {
      for (const LiveEntry *r : dying) on_release(e, *r);
    }
  };

  // Applies `e`; `to` (when set) hears of what it changes.
  void apply(const Event &e, Listener *to);
  // Replaces the state with a checkpoint's: the live allocations (tags 0),
  // the mappings and the released handles they keep alive.
  void restore(const std::vector<Event> &live, const std::vector<VmmMap> &maps,
               const std::vector<uint64_t> &released);
  // Sets every entry's tag (in table order).
  void retag(const std::function<uint64_t(const Event &)> &fn);

  // Every live entry, pointers first, then VMM handles (table order).
  void for_each_live(const std::function<void(const LiveEntry &)> &fn) const;
  uint64_t live_bytes() const { return live_bytes_; }
  size_t size() const { return ptrs_.size() + vmm_.size(); }
  // The VMM mappings in force (cuMemMap minus cuMemUnmap).
  const VmmMapTable &vmm_maps() const { return vmm_maps_; }
  // Every live allocation, for a checkpoint (the order a restore keeps).
  std::vector<Event> live_events() const;

 private:
  using Table = std::unordered_map<uint64_t, LiveEntry>;
  Table &table(Family f) { return f == Family::Vmm ? vmm_ : ptrs_; }
  void teardown(const Event &e, Listener *to);

  Table ptrs_, vmm_;
  VmmMapTable vmm_maps_;
  uint64_t live_bytes_ = 0;
};

}  // namespace torchseal
