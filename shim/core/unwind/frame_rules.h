// How to step from a frame to its caller, keyed by the frame's return
// address. A rule is learned once per address from libunwind (which reads
// the DWARF CFI) and applied afterwards without it: the per-frame cost drops
// from a CFI interpretation to a table probe and two loads.
//
// Readers never lock, and a table is insert-only: inserts (serialised by a
// lock) publish the rule before the key, and a slot never changes key.
// Unloaded code retires the whole table for a fresh one; the retired pages
// are returned to the kernel and read as zeros (a miss) by a walker still
// holding the old table, so no reader can pair a key with another key's rule.
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/core/shard_lock.h"
#include "shim/core/unwind/address_ranges.h"

namespace torchseal::unwind {

enum class RuleKind : uint8_t {
  Absent = 0,
  Step = 1,      // CFA = base + cfa_off; caller's rbp at CFA + rbp_off, or unchanged
  End = 2,       // outermost frame: libunwind stops here too
  Fallback = 3,  // signal frame, realigned stack, odd CFI: let libunwind walk
};

struct FrameRule {
  RuleKind kind = RuleKind::Absent;
  bool rbp_base = false;  // CFA is rbp-relative (else rsp-relative)
  int32_t cfa_off = 0;
  int32_t rbp_off = 0;  // 0: the frame leaves rbp alone

  // The frame-pointer frame: CFA = rbp + 16, caller's rbp saved at CFA - 16.
  static constexpr FrameRule frame_pointer() { return {RuleKind::Step, true, 16, -16}; }

  // One word, so a table slot is a key and a value: kind in bits 0-7, the
  // base in bit 8, cfa_off in 16-39, rbp_off (signed) in 40-63.
  static constexpr int32_t kMaxOffset = (1 << 23) - 1;
  constexpr uint64_t pack() const {
    return static_cast<uint64_t>(kind) | (uint64_t{rbp_base} << 8) |
           ((static_cast<uint64_t>(static_cast<uint32_t>(cfa_off)) & 0xffffff) << 16) |
           ((static_cast<uint64_t>(static_cast<uint32_t>(rbp_off)) & 0xffffff) << 40);
  }
  static constexpr FrameRule unpack(uint64_t v) {
    FrameRule r;
    r.kind = static_cast<RuleKind>(v & 0xff);
    r.rbp_base = (v >> 8) & 1;
    r.cfa_off = static_cast<int32_t>((v >> 16) & 0xffffff);
    r.rbp_off = static_cast<int32_t>(static_cast<uint32_t>(v >> 40) << 8) >> 8;
    return r;
  }
};

// The walker's common case is one compare against this.
constexpr uint64_t kPackedFramePointer = FrameRule::frame_pointer().pack();
static_assert(FrameRule::unpack(kPackedFramePointer).rbp_off == -16);

class RuleTable {
 public:
  static constexpr int kBits = 17;  // 128k slots: 2 MiB of address space, touched on use

  // Keys at [0, kSlots), rules at [kSlots, 2 * kSlots). A frame-pointer
  // frame, the common case, is told by its key alone: the key is ~ip, and
  // no rule is stored. The walker's probe is one load and one xor: 0 is
  // another rule for ip, ~0 the frame-pointer rule, on one cache line.
  // (Return addresses are user-space, so ~ip never equals another ip.)
  static constexpr uint64_t kSlots = 1ull << kBits;
  static constexpr uint64_t fp_key(uint64_t ip) { return ~ip; }
  using Table = const std::atomic<uint64_t> *;

  // The packed rule for `ip`, or 0 when unknown. Lock-free.
  uint64_t find(uint64_t ip) const {
    Table t = table();
    if (!t) return 0;
    for (uint64_t i = index(ip), probes = 0; probes < kMaxProbes; ++probes, i = (i + 1) & kMask) {
      uint64_t k = t[i].load(std::memory_order_acquire);
      if (k == ip) return t[kSlots + i].load(std::memory_order_acquire);
      if (k == fp_key(ip)) return kPackedFramePointer;
      if (!k) return 0;
    }
    return 0;
  }
  // The walker's inline probe, in a table it loaded once with table(): the
  // key in the home slot of `ip`. It is fp_key(ip) for a frame-pointer
  // frame; ip for another rule, then rule_at(); anything else is not
  // final, find() settles it.
  Table table() const { return table_.load(std::memory_order_acquire); }
  static uint64_t index(uint64_t ip) { return (ip * 0x9e3779b97f4a7c15ULL) >> (64 - kBits); }
  static uint64_t key_at(Table t, uint64_t i) { return t[i].load(std::memory_order_acquire); }
  static uint64_t rule_at(Table t, uint64_t i) {
    return t[kSlots + i].load(std::memory_order_acquire);
  }
  // Maps the table now (at first CUDA use), so the walker never sees it
  // missing. False if that failed.
  bool reserve();
  // Publishes a rule. False when the table is unavailable or the probe run is
  // full (the caller then walks with libunwind).
  bool insert(uint64_t ip, uint64_t packed);
  // Code was unloaded: its addresses may come back holding other code.
  // False once kMaxTables tables were retired (each keeps its address range
  // reserved): the caller then stops using rules.
  bool clear();
  // Whether a rule (or a frame-pointer key) is stored for an address inside
  // `ranges` ([lo, hi), sorted). Scans the whole table: for unloads only.
  bool has_key_in(const AddressRanges &ranges) const;
  // Child side of fork: the inserting thread may not exist any more.
  void reset_lock_after_fork() { lock_.reset_after_fork(); }

 private:
  static constexpr uint64_t kMask = kSlots - 1;
  static constexpr int kMaxProbes = 32;
  static constexpr int kMaxTables = 64;
  static constexpr size_t kBytes = 2 * kSlots * sizeof(uint64_t);
  static std::atomic<uint64_t> *map_table();

  std::atomic<std::atomic<uint64_t> *> table_{nullptr};
  ShardLock lock_;   // serialises inserts and retirement
  int retired_ = 0;  // under lock_
};

extern RuleTable g_rules;

}  // namespace torchseal::unwind
