// Raw reads of another subsystem's memory (CPython's objects), by address.
// The interpreter's structs are not ours and their types are not visible to
// the compiler, so every read is a memcpy from an integer address: no strict
// aliasing assumptions, no alignment traps, one load after optimisation.
#pragma once

#include <cstddef>
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

// Copies n bytes at `src` of this process into dst without faulting: false
// when any of it is not mapped (process_vm_readv on ourselves). For memory
// another thread may free while we read it (its thread state, its frames);
// about 1 us a call, so only off the hot path. False, always, where the
// kernel or a seccomp filter refuses the call.
bool read_guarded(void *dst, uintptr_t src, size_t n);

// The two ways a walk reads the interpreter's memory. Direct: the calling
// thread's own frames, which nothing else changes (memcpy, no checks).
// Guarded: another thread's, which may change or be freed under the walk;
// a failed read gives 0 and sticks (failed()), which the walker's
// plausibility checks turn into the end of the walk.
struct DirectRead {
  static constexpr bool failed() { return false; }
  template <typename T>
  T get(uintptr_t addr) const {
    return rd<T>(addr);
  }
  uintptr_t ptr(uintptr_t addr) const { return rd_ptr(addr); }
};

struct GuardedRead {
  bool bad = false;
  bool failed() const { return bad; }
  template <typename T>
  T get(uintptr_t addr) {
    T v{};
    if (bad || !read_guarded(&v, addr, sizeof v)) {
      bad = true;
      return T{};
    }
    return v;
  }
  uintptr_t ptr(uintptr_t addr) { return get<uintptr_t>(addr); }
};

// A cheap plausibility test for an object or frame pointer read out of the
// interpreter: user-space x86-64/aarch64 canonical range and 8-byte aligned
// (every CPython object and interpreter frame is). It catches NULL, small
// tags and obvious garbage; it cannot prove the memory is mapped.
inline bool plausible(uintptr_t p) { return p >= 4096 && (p & 7) == 0 && p < (uintptr_t{1} << 47); }

}  // namespace torchseal::py
