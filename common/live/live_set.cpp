#include "common/live/live_set.h"

#include "common/live/live_rules.h"

namespace torchseal {

void LiveSet::apply(const Event &e, Listener *to) {
  switch (e.op) {
    case Op::Alloc: {
      // An allocated handle is an unreleased one (a failed release undone).
      if (e.family == Family::Vmm) vmm_maps_.forget(e.addr);
      Table &t = table(e.family);
      auto it = t.find(e.addr);
      if (it != t.end()) {
        if (to) to->on_release(e, it->second);
        live_bytes_ -= it->second.alloc.size;
        // Replaced in place: the entry keeps its slot in the table's order.
        it->second = LiveEntry{e, to ? to->on_alloc(e) : 0};
      } else {
        t.emplace(e.addr, LiveEntry{e, to ? to->on_alloc(e) : 0});
      }
      live_bytes_ += e.size;
      break;
    }
    case Op::Free: {
      Table &t = table(e.family);
      auto it = t.find(e.addr);
      if (it == t.end()) break;
      // A VMM handle released while mapped lives until its last unmap.
      if (e.family == Family::Vmm && !vmm_maps_.release(e.addr)) break;
      if (to) to->on_release(e, it->second);
      live_bytes_ -= it->second.alloc.size;
      t.erase(it);
      break;
    }
    case Op::Teardown:
      teardown(e, to);
      break;
    case Op::Map:
    case Op::Unmap: {
      std::vector<uint64_t> gone;
      vmm_maps_.apply(e.op, e.addr, e.size, e.stream, &gone, e.stack, e.pystack);
      for (uint64_t h : gone) {
        auto it = vmm_.find(h);
        if (it == vmm_.end()) continue;
        if (to) to->on_release(e, it->second);
        live_bytes_ -= it->second.alloc.size;
        vmm_.erase(it);
      }
      break;
    }
    default:
      break;
  }
}

void LiveSet::teardown(const Event &e, Listener *to) {
  std::vector<const LiveEntry *> dying;
  for (Table *t : {&ptrs_, &vmm_})
    for (const auto &kv : *t) {
      const Event &a = kv.second.alloc;
      if (live::ends_at_teardown(e.context, e.device, a.context, a.device))
        dying.push_back(&kv.second);
    }
  if (to) to->on_teardown(e, dying);
  for (const LiveEntry *r : dying) {
    live_bytes_ -= r->alloc.size;
    if (r->alloc.family == Family::Vmm) vmm_maps_.forget(r->alloc.addr);
    table(r->alloc.family).erase(r->alloc.addr);
  }
}

void LiveSet::restore(const std::vector<Event> &live, const std::vector<VmmMap> &maps,
                      const std::vector<uint64_t> &released) {
  ptrs_.clear();
  vmm_.clear();
  live_bytes_ = 0;
  vmm_maps_ = VmmMapTable();
  for (const VmmMap &m : maps)
    vmm_maps_.apply(Op::Map, m.va, m.size, m.handle, nullptr, m.stack, m.pystack);
  vmm_maps_.restore_released(released);
  for (const Event &e : live) {
    table(e.family)[e.addr] = LiveEntry{e, 0};
    live_bytes_ += e.size;
  }
}

void LiveSet::retag(const std::function<uint64_t(const Event &)> &fn) {
  for (Table *t : {&ptrs_, &vmm_})
    for (auto &kv : *t) kv.second.tag = fn(kv.second.alloc);
}

void LiveSet::for_each_live(const std::function<void(const LiveEntry &)> &fn) const {
  for (const Table *t : {&ptrs_, &vmm_})
    for (const auto &kv : *t) fn(kv.second);
}

std::vector<Event> LiveSet::live_events() const {
  std::vector<Event> out;
  out.reserve(size());
  for_each_live([&](const LiveEntry &r) { out.push_back(r.alloc); });
  return out;
}

}  // namespace torchseal
