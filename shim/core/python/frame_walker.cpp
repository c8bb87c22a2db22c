#include "shim/core/python/frame_walker.h"

#include "shim/core/python/code_reader.h"
#include "shim/core/python/raw_read.h"

namespace torchseal::py {
namespace {
// Frames skipped (C-stack entries, incomplete frames) do not count towards
// the cap, but a corrupt, cyclic chain must still end.
constexpr int kMaxLinks = 4 * kMaxPyFrames;

template <typename Read>
int walk(const Interp &in, uintptr_t tstate, PositionKey *out, int cap, Read &read) {
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
      // Incomplete frames (before their first RESUME) are invisible to
      // Python's own f_back walk; generators are exempt, they may be
      // suspended at any point and only linked while running.
      if (owner != kOwnedByGenerator &&
          ip < first + 2 * static_cast<uint64_t>(
                               read.template get<int32_t>(code + static_cast<uint32_t>(l.co_firsttraceable))))
        continue;
      offset = static_cast<int64_t>(ip - first);
      // A not-yet-started frame points one unit before the code (3.11/3.12).
      if (offset < 0) offset = -1;
      if (l.co_identity_is_size && offset >= 2 * read.template get<int64_t>(code + l.co_identity_word))
        offset = -1;
    }
    uint64_t fingerprint = code_fingerprint(l, code, read);
    if (read.failed()) break;  // the frame changed under a guarded walk
    out[n++] = PositionKey{code, offset, fingerprint};
  }
  return n;
}

}  // namespace

int walk_frames(const Interp &in, uintptr_t tstate, PositionKey *out, int cap) {
  DirectRead read;
  return walk(in, tstate, out, cap, read);
}

int walk_other_thread(const Interp &in, uintptr_t tstate, PositionKey *out, int cap) {
  GuardedRead read;
  return walk(in, tstate, out, cap, read);
}

}  // namespace torchseal::py
