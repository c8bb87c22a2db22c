// Store-load ordering between many hot threads and one rare one, where only
// the rare side pays. Each hot thread publishes "I am in" with a plain
// store and then reads the rare side's flag; the rare side sets its flag,
// runs heavy(), and reads the hot threads' stores. heavy() is a
// membarrier(2) that makes every running thread of the process execute a
// full barrier, so the hot side's light() needs only a compiler barrier:
// either the hot thread sees the flag, or the rare side sees it in.
// (The Dekker pattern of liburcu and of the JVM's biased locks.)
//
// Without membarrier (old kernel, seccomp), light() is a full fence and
// heavy() too: the same ordering at a locked instruction per light().
#pragma once

#include <atomic>

namespace torchseal::asym {

extern std::atomic<bool> g_membarrier;

// Registers this process for expedited membarriers. Call before any hot
// thread relies on light() being a compiler barrier, and again in a child
// after fork (the registration belongs to the address space).
void init();

inline void light() {
  if (g_membarrier.load(std::memory_order_relaxed))
    std::atomic_signal_fence(std::memory_order_seq_cst);
  else
    std::atomic_thread_fence(std::memory_order_seq_cst);
}

// False when the ordering could not be had this time: the membarrier
// failed (a seccomp filter installed since registration), and the hot
// threads go back to full fences from their next light() on, but one
// already past a light() as a compiler barrier is not ordered now. The
// caller tries again later.
bool heavy();

}  // namespace torchseal::asym
