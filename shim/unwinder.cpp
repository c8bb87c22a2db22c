#include "unwinder.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>

#include <cstring>

namespace torchseal {
namespace {

using UnwBacktrace = int (*)(void **, int);
using UnwSetCachingPolicy = int (*)(void *, int);
using UnwSetCacheSize = int (*)(void *, size_t, int);

UnwBacktrace g_unw_backtrace = nullptr;

// Address range of libtorchseal's executable segments: frames in it are ours.
uintptr_t g_self_lo = 0, g_self_hi = 0;

int find_self(struct dl_phdr_info *info, size_t, void *data) {
  auto probe = reinterpret_cast<uintptr_t>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const auto &ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
    if (probe >= lo && probe < hi) {
      g_self_lo = lo;
      g_self_hi = hi;
      return 1;
    }
  }
  return 0;
}

// libunwind's UNW_CACHE_PER_THREAD; spelled out so we need no link-time dep.
constexpr int kCachePerThread = 2;

}  // namespace

const char *unwinder_init() {
  dl_iterate_phdr(find_self, reinterpret_cast<void *>(&unwinder_init));
  void *h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (h) {
    g_unw_backtrace = reinterpret_cast<UnwBacktrace>(dlsym(h, "unw_backtrace"));
    auto policy = reinterpret_cast<UnwSetCachingPolicy>(dlsym(h, "_ULx86_64_set_caching_policy"));
    auto cache_size = reinterpret_cast<UnwSetCacheSize>(dlsym(h, "_ULx86_64_set_cache_size"));
    auto as = reinterpret_cast<void **>(dlsym(h, "_ULx86_64_local_addr_space"));
    if (policy && as) policy(*as, kCachePerThread);
    if (cache_size && as) cache_size(*as, 1024, 0);
  }
  if (g_unw_backtrace) return "libunwind";
  // Warm up glibc's backtrace() (it dlopens libgcc_s on first use).
  void *warm[2];
  backtrace(warm, 2);
  return "glibc backtrace";
}

const uint64_t *capture_stack_inplace(uint64_t (&buf)[kCaptureBufFrames], int max, int *n_out) {
  static_assert(sizeof(void *) == sizeof(uint64_t));
  int want = max + kCaptureSlack;
  if (want > kCaptureBufFrames) want = kCaptureBufFrames;
  auto *raw = reinterpret_cast<void **>(buf);
  int n = g_unw_backtrace ? g_unw_backtrace(raw, want) : backtrace(raw, want);
  int i = 0;
  while (i < n && buf[i] >= g_self_lo && buf[i] < g_self_hi) ++i;
  int k = n - i;
  *n_out = k < max ? k : max;
  return buf + i;
}

int capture_stack(uint64_t *out, int max) {
  uint64_t buf[kCaptureBufFrames];
  int n;
  const uint64_t *ips = capture_stack_inplace(buf, max, &n);
  memcpy(out, ips, static_cast<size_t>(n) * sizeof(uint64_t));
  return n;
}

}  // namespace torchseal
