#include "report/replay/replay.h"

namespace torchseal {

void Replay::on_event(const Event &e) {
  if (!obs_.wants(e)) return;
  obs_.on_event(e);
  switch (e.op) {
    case Op::Alloc: {
      Table &t = table(e.family);
      auto it = t.find(e.addr);
      if (it != t.end()) {
        obs_.on_release(e, it->second);
        live_bytes_ -= it->second.alloc.size;
        // Replaced in place: the record keeps its slot in the table's order.
        it->second = ReplayRecord{e, obs_.on_alloc(e)};
      } else {
        t.emplace(e.addr, ReplayRecord{e, obs_.on_alloc(e)});
      }
      live_bytes_ += e.size;
      break;
    }
    case Op::Free: {
      Table &t = table(e.family);
      auto it = t.find(e.addr);
      if (it != t.end()) {
        obs_.on_release(e, it->second);
        live_bytes_ -= it->second.alloc.size;
        t.erase(it);
      }
      break;
    }
    case Op::Teardown:
      teardown(e);
      break;
    default:
      break;
  }
}

void Replay::teardown(const Event &e) {
  std::vector<const ReplayRecord *> dying;
  for (Table *t : {&ptrs_, &vmm_})
    for (const auto &kv : *t) {
      const Event &a = kv.second.alloc;
      if (e.context ? a.context == e.context : (e.device < 0 || a.device == e.device))
        dying.push_back(&kv.second);
    }
  obs_.on_teardown(e, dying);
  for (const ReplayRecord *r : dying) {
    live_bytes_ -= r->alloc.size;
    table(r->alloc.family).erase(r->alloc.addr);
  }
}

void Replay::on_label(uint32_t id, std::string &&label) {
  obs_.on_label(id, std::string(label));
  labels_[id] = std::move(label);
}

std::string Replay::label(uint64_t id) const {
  auto it = id <= UINT32_MAX ? labels_.find(static_cast<uint32_t>(id)) : labels_.end();
  return it != labels_.end() ? it->second : "#" + std::to_string(id);
}

void Replay::for_each_live(const std::function<void(const ReplayRecord &)> &fn) const {
  for (const Table *t : {&ptrs_, &vmm_})
    for (const auto &kv : *t) fn(kv.second);
}

}  // namespace torchseal
