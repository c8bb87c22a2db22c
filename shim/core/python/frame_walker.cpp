#include "shim/core/python/frame_walker.h"

#include "shim/core/python/code_reader.h"
#include "shim/core/python/raw_read.h"

namespace torchseal::py {
namespace {
// Frames skipped (C-stack entries, incomplete frames) do not count towards
// the cap, but a corrupt, cyclic chain must still end.
constexpr int kMaxLinks = 4 * kMaxPyFrames;

// The first code unit of the thread-local copy `index` of `code`'s bytecode,
// co_tlbc->entries[index], or 0. The array is read guarded on every walk,
// the calling thread's too: when a thread with a larger index first runs
// this code, co_tlbc is replaced by a larger array and the old one is freed
// once every ATTACHED thread has passed a quiescent state (QSBR,
// _PyMem_FreeDelayed). A thread that released the GIL (detached), as one
// inside a CUDA call usually has, does not hold that free back.
template <typename Read>
uintptr_t read_copy_start(const Layout &l, uintptr_t code, int64_t index, Read &read) {
  uintptr_t array = read.ptr(code + static_cast<uint32_t>(l.co_tlbc));
  if (!plausible(array) || read.failed()) return 0;
  GuardedRead guarded;
  int64_t size = guarded.get<int64_t>(array + kCodeArraySize);
  if (index >= size) return 0;
  uintptr_t start =
      guarded.ptr(array + kCodeArrayEntries + sizeof(uintptr_t) * static_cast<uint64_t>(index));
  return guarded.failed() || !plausible(start) ? 0 : start;
}

// Free-threaded 3.14+: the start of the bytecode copy a frame runs, the one
// its tlbc_index names (entry 0 is co_code_adaptive itself). 0 when the copy
// cannot be read (process_vm_readv refused, a garbage index). Out of line:
// GIL builds never call it.
template <typename Read>
__attribute__((noinline)) uintptr_t thread_bytecode(const Layout &l, uintptr_t frame,
                                                    uintptr_t code, uintptr_t ip, Read &read,
                                                    TlbcCache *cache) {
  uintptr_t main = code + static_cast<uint32_t>(l.co_code_adaptive);
  int64_t index = read.template get<int32_t>(frame + static_cast<uint32_t>(l.fr_tlbc_index));
  if (index <= 0) return index == 0 ? main : 0;
  uint64_t fingerprint = code_fingerprint(l, code, read);
  uint64_t code_bytes = 2 * read.template get<uint64_t>(code + l.co_identity_word);
  TlbcCache::Slot *slot = nullptr;
  if (cache) {
    slot = &cache->slots[mix64(code ^ static_cast<uint64_t>(index)) & (TlbcCache::kSlots - 1)];
    if (slot->code == code && slot->fingerprint == fingerprint && slot->index == index &&
        ip >= slot->start && ip - slot->start < code_bytes)
      return slot->start;
  }
  uintptr_t start = read_copy_start(l, code, index, read);
  if (slot && start) *slot = {code, fingerprint, index, start};
  return start;
}

// kTlbc: the build runs thread-local bytecode (free-threaded 3.14+). A
// template flag, so GIL builds' walks test nothing more per frame.
template <bool kTlbc, typename Read>
int walk(const Interp &in, uintptr_t tstate, PositionKey *out, int cap, Read &read,
         TlbcCache *cache) {
  const Layout &l = *in.layout;
  uintptr_t f = read.ptr(tstate + l.ts_frame);
  if (l.cframe_current_frame != kAbsent) {
    if (!plausible(f)) return 0;
    f = read.ptr(f + static_cast<uint32_t>(l.cframe_current_frame));
  }
  int n = 0;
  for (int links = 0; f && n < cap && links < kMaxLinks; ++links, f = read.ptr(f + l.fr_previous)) {
    if (!plausible(f) || read.failed()) break;
    int owner = kOwnedByThread;
    if (l.fr_owner != kAbsent) {
      owner = read.template get<uint8_t>(f + static_cast<uint32_t>(l.fr_owner));
      if (owner > l.fr_owner_last) break;    // not a frame: stop rather than guess
      if (owner >= kOwnedByEntry) continue;  // 3.12+ entry frame: not user code
    }
    // Untagged, a 3.14+ stack reference fails the checks below and the frame
    // would silently vanish.
    uintptr_t code = read.ptr(f + l.fr_code) & ~uintptr_t{l.fr_code_tag_bits};
    // 3.13's entry frames hold None here; anything that is not a code object
    // is not a Python function frame.
    if (!plausible(code) || read.ptr(code + l.ob_type) != in.code_type) continue;

    int64_t offset;
    if (l.co_code_adaptive == kAbsent) {
      // 3.10: f_lasti is the index of the last instruction, -1 before start.
      int32_t lasti = read.template get<int32_t>(f + l.fr_position);
      offset = lasti < 0 ? -1 : 2 * int64_t{lasti};
    } else {
      uintptr_t first = code + static_cast<uint32_t>(l.co_code_adaptive);
      uintptr_t ip = read.ptr(f + l.fr_position);
      if constexpr (kTlbc) first = thread_bytecode(l, f, code, ip, read, cache);
      if (kTlbc && !first) {
        offset = kOffsetUnknown;  // no line rather than a wrong one
      } else {
        // Incomplete frames (before their first RESUME) are invisible to
        // Python's own f_back walk; generators are exempt, they may be
        // suspended at any point and only linked while running.
        if (owner != kOwnedByGenerator &&
            ip < first + 2 * static_cast<uint64_t>(read.template get<int32_t>(
                                 code + static_cast<uint32_t>(l.co_firsttraceable))))
          continue;
        offset = static_cast<int64_t>(ip - first);
        // A not-yet-started frame points one unit before the code (3.11/3.12).
        if (offset < 0) offset = -1;
        if (l.co_identity_is_size &&
            offset >= 2 * read.template get<int64_t>(code + l.co_identity_word))
          offset = -1;
      }
    }
    uint64_t fingerprint = code_fingerprint(l, code, read);
    if (read.failed()) break;  // the frame changed under a guarded walk
    out[n++] = PositionKey{code, offset, fingerprint};
  }
  return n;
}

}  // namespace

int walk_frames(const Interp &in, uintptr_t tstate, PositionKey *out, int cap, TlbcCache *tlbc) {
  DirectRead read;
  if (in.layout->fr_tlbc_index != kAbsent) return walk<true>(in, tstate, out, cap, read, tlbc);
  return walk<false>(in, tstate, out, cap, read, tlbc);
}

int walk_other_thread(const Interp &in, uintptr_t tstate, PositionKey *out, int cap) {
  GuardedRead read;
  if (in.layout->fr_tlbc_index != kAbsent) return walk<true>(in, tstate, out, cap, read, nullptr);
  return walk<false>(in, tstate, out, cap, read, nullptr);
}

}  // namespace torchseal::py
