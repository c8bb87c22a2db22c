#include "shim/core/mark_labels.h"

#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

#include "common/util/fork_safe.h"
#include "shim/core/shard_lock.h"

namespace torchseal::history {

namespace {

// Bounds on what user marks can make the shim keep.
constexpr size_t kMaxLabels = 1 << 16;
constexpr size_t kMaxLabelBytes = 1024;

struct State {
  ShardLock lock;
  std::unordered_map<std::string, uint32_t> ids;  // mark label -> id, under lock
  tseal::LabelsRecord fresh;                      // not yet written, under lock
};

State &S() {
  static constinit Lazy<State> s;
  return s.get();
}

}  // namespace

uint32_t intern_label(const char *label) {
  State &s = S();
  std::string key(label, strnlen(label, kMaxLabelBytes));
  Guard g(s.lock);
  auto it = s.ids.find(key);
  if (it != s.ids.end()) return it->second;
  if (s.ids.size() >= kMaxLabels) return 0;
  uint32_t id = static_cast<uint32_t>(s.ids.size() + 1);
  s.ids.emplace(key, id);
  s.fresh.labels.emplace_back(id, std::move(key));
  return id;
}

namespace labels {

void take_new(tseal::LabelsRecord &rec) {
  State &s = S();
  Guard g(s.lock);
  rec.labels.swap(s.fresh.labels);
}

void reset_after_fork() {
  State &s = S();
  s.lock.reset_after_fork();
  new (&s.ids) std::unordered_map<std::string, uint32_t>();
  new (&s.fresh) tseal::LabelsRecord();
}

}  // namespace labels
}  // namespace torchseal::history
