#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "common/util/log.h"
#include "shim/core/python/raw_read.h"

namespace torchseal::py {
namespace {
// Unknown, usable, refused (ENOSYS, EPERM: a seccomp filter or an old kernel).
std::atomic<int> g_usable{0};
}  // namespace

bool read_guarded(void *dst, uintptr_t src, size_t n) {
  if (g_usable.load(std::memory_order_relaxed) < 0) return false;
  iovec local{dst, n};
  iovec remote{reinterpret_cast<void *>(src), n};
  // getpid() is a cached-free syscall in modern glibc; the pid of a forked
  // child differs from the parent's, so it is not cached here either.
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got == static_cast<ssize_t>(n)) {
    g_usable.store(1, std::memory_order_relaxed);
    return true;
  }
  if (got < 0 && (errno == ENOSYS || errno == EPERM) &&
      g_usable.load(std::memory_order_relaxed) == 0) {
    g_usable.store(-1, std::memory_order_relaxed);
    log::info("process_vm_readv is refused here; autograd threads get no borrowed Python stack");
  }
  return false;
}

}  // namespace torchseal::py
