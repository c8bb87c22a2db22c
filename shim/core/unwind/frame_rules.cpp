#include "shim/core/unwind/frame_rules.h"

#include <sys/mman.h>

namespace torchseal::unwind {

std::atomic<uint64_t> *RuleTable::map_table() {
  // Anonymous zero pages: only the slots in use ever become resident.
  void *p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::atomic<uint64_t> *>(p);
}

bool RuleTable::reserve() {
  if (table_.load(std::memory_order_acquire)) return true;
  Guard g(lock_);
  if (table_.load(std::memory_order_relaxed)) return true;
  std::atomic<uint64_t> *t = map_table();
  table_.store(t, std::memory_order_release);
  return t != nullptr;
}

bool RuleTable::insert(uint64_t ip, uint64_t packed) {
  if (!ip || !packed || ip >= fp_key(ip)) return false;  // not a user-space address
  Guard g(lock_);
  std::atomic<uint64_t> *t = table_.load(std::memory_order_relaxed);
  if (!t) return false;
  for (uint64_t i = index(ip), probes = 0; probes < kMaxProbes; ++probes, i = (i + 1) & kMask) {
    uint64_t k = t[i].load(std::memory_order_relaxed);
    if (k == ip || k == fp_key(ip)) return true;  // another thread learned it first
    if (k) continue;
    if (packed == kPackedFramePointer) {
      t[i].store(fp_key(ip), std::memory_order_release);
    } else {
      t[kSlots + i].store(packed, std::memory_order_release);
      t[i].store(ip, std::memory_order_release);
    }
    return true;
  }
  return false;
}

bool RuleTable::clear() {
  Guard g(lock_);
  std::atomic<uint64_t> *old = table_.load(std::memory_order_relaxed);
  if (!old) return true;
  if (retired_ == kMaxTables) return false;
  std::atomic<uint64_t> *fresh = map_table();
  if (!fresh) return false;
  table_.store(fresh, std::memory_order_release);
  ++retired_;
  // The retired table stays mapped (a walker may still read it) but its
  // memory goes back to the kernel; it now reads as zeros: misses.
  madvise(old, kBytes, MADV_DONTNEED);
  return true;
}

bool RuleTable::has_key_in(const AddressRanges &ranges) const {
  Table t = table();
  if (!t || ranges.empty()) return false;
  for (uint64_t i = 0; i < kSlots; ++i) {
    uint64_t k = t[i].load(std::memory_order_relaxed);
    if (!k) continue;
    // A frame-pointer key is ~ip: user-space addresses leave its top bit set.
    if (in_ranges(ranges, (k >> 63) ? ~k : k)) return true;
  }
  return false;
}

// Constant-initialised and trivially destructible: usable before any
// constructor runs and after every destructor.
constinit RuleTable g_rules;

}  // namespace torchseal::unwind
