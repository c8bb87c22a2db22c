#include "frame_rules.h"

#include <sched.h>
#include <sys/mman.h>


namespace torchseal::unwind {

namespace {
class SpinGuard {
 public:
  explicit SpinGuard(std::atomic<bool> &l) : l_(l) {
    // Held only for a probe run and two stores; yield in case the holder
    // was preempted.
    while (l_.exchange(true, std::memory_order_acquire)) sched_yield();
  }
  ~SpinGuard() { l_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> &l_;
};
}  // namespace

RuleTable::Slot *RuleTable::map_slots() {
  Slot *t = slots_.load(std::memory_order_acquire);
  if (t) return t;
  // Anonymous zero pages: only the slots in use ever become resident.
  void *p = mmap(nullptr, sizeof(Slot) << kBits, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  Slot *expected = nullptr;
  if (!slots_.compare_exchange_strong(expected, static_cast<Slot *>(p))) {
    munmap(p, sizeof(Slot) << kBits);
    return expected;
  }
  return static_cast<Slot *>(p);
}

bool RuleTable::insert(uint64_t ip, uint64_t packed) {
  if (!ip || !packed) return false;
  Slot *t = map_slots();
  if (!t) return false;
  SpinGuard g(lock_);
  for (uint64_t i = index(ip), probes = 0; probes < kMaxProbes; ++probes, i = (i + 1) & kMask) {
    uint64_t k = t[i].key.load(std::memory_order_relaxed);
    if (k == ip) return true;  // another thread learned it first
    if (k) continue;
    t[i].rule.store(packed, std::memory_order_release);
    t[i].key.store(ip, std::memory_order_release);
    used_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  return false;
}

void RuleTable::clear() {
  Slot *t = slots_.load(std::memory_order_acquire);
  if (!t) return;
  SpinGuard g(lock_);
  // Zero pages in place: a concurrent reader sees key 0 (a miss) or a
  // re-read key mismatch, never a torn pair, and the memory is returned.
  madvise(t, sizeof(Slot) << kBits, MADV_DONTNEED);
  used_.store(0, std::memory_order_relaxed);
}

// Constant-initialised and trivially destructible: usable before any
// constructor runs and after every destructor.
constinit RuleTable g_rules;

}  // namespace torchseal::unwind
