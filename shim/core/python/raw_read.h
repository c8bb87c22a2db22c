// Raw reads of another subsystem's memory (CPython's objects), by address.
// The interpreter's structs are not ours and their types are not visible to
// the compiler, so every read is a memcpy from an integer address: no strict
// aliasing assumptions, no alignment traps, one load after optimisation.
#pragma once

#include <cstdint>
#include <cstring>

namespace torchseal::py {

template <typename T>
inline T rd(uintptr_t addr) {
  T v;
  std::memcpy(&v, reinterpret_cast<const void *>(addr), sizeof v);
  return v;
}

inline uintptr_t rd_ptr(uintptr_t addr) { return rd<uintptr_t>(addr); }

// A cheap plausibility test for an object or frame pointer read out of the
// interpreter: user-space x86-64/aarch64 canonical range and 8-byte aligned
// (every CPython object and interpreter frame is). It catches NULL, small
// tags and obvious garbage; it cannot prove the memory is mapped.
inline bool plausible(uintptr_t p) { return p >= 4096 && (p & 7) == 0 && p < (uintptr_t{1} << 47); }

}  // namespace torchseal::py
