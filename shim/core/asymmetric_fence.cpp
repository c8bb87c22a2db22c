#include "shim/core/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace torchseal::asym {

std::atomic<bool> g_membarrier{false};

namespace {
long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }
}  // namespace

void init() {
  long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  bool ok = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
            membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  // Hot threads may be between their store and their load right now: they
  // switch to the cheap side only after this store, and the first heavy()
  // orders them either way.
  g_membarrier.store(ok, std::memory_order_seq_cst);
}

bool heavy() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!g_membarrier.load(std::memory_order_relaxed)) return true;
  // Once registered it cannot fail (membarrier(2)) unless something forbids
  // the call since (seccomp): hot threads then go back to full fences.
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return true;
  g_membarrier.store(false, std::memory_order_seq_cst);
  return false;
}

}  // namespace torchseal::asym
