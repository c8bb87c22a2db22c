#include "cupti_backend/context_devices.h"

#include <atomic>
#include <cstdint>

#include "shim/core/driver_api.h"

namespace torchseal::cupti {
namespace {

// Processes have a handful of contexts (one primary per device, a few
// created ones); past this the device is simply asked each time.
constexpr int kSlots = 64;

struct Slot {
  std::atomic<CUcontext> ctx{nullptr};
  std::atomic<int> device{-1};
};
Slot g_slots[kSlots];

int ask_driver(CUcontext ctx) {
  const DriverQueries &q = driver_queries();
  if (!q.ctx_get_current || !q.ctx_get_device) return -1;
  CUcontext cur = nullptr;
  if (q.ctx_get_current(&cur) != CUDA_SUCCESS || !cur) return -1;
  // cuCtxGetDevice answers for the current context only.
  if (ctx && cur != ctx) return -1;
  CUdevice dev = -1;
  if (q.ctx_get_device(&dev) != CUDA_SUCCESS) return -1;
  return static_cast<int>(dev);
}

// A slot being filled: never equal to a real context, so readers skip it.
CUcontext busy() { return reinterpret_cast<CUcontext>(uintptr_t{1}); }

void remember(CUcontext ctx, int dev) {
  for (Slot &s : g_slots) {
    CUcontext expected = nullptr;
    // Claim the slot, write the device, then publish the key: a reader that
    // finds the key also sees its device.
    if (!s.ctx.compare_exchange_strong(expected, busy(), std::memory_order_acquire)) continue;
    s.device.store(dev, std::memory_order_relaxed);
    s.ctx.store(ctx, std::memory_order_release);
    return;
  }
}

}  // namespace

int device_of_context(CUcontext ctx) {
  if (!ctx) return current_device();
  for (Slot &s : g_slots)
    if (s.ctx.load(std::memory_order_acquire) == ctx)
      return s.device.load(std::memory_order_relaxed);
  int dev = ask_driver(ctx);
  if (dev >= 0) remember(ctx, dev);
  return dev;
}

int current_device() {
  const DriverQueries &q = driver_queries();
  CUcontext cur = nullptr;
  if (!q.ctx_get_current || q.ctx_get_current(&cur) != CUDA_SUCCESS || !cur) return -1;
  return device_of_context(cur);
}

void forget_context(CUcontext ctx) {
  if (!ctx) return;
  for (Slot &s : g_slots) {
    CUcontext expected = ctx;
    s.ctx.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }
}

void forget_all_contexts() {
  for (Slot &s : g_slots) s.ctx.store(nullptr, std::memory_order_release);
}

}  // namespace torchseal::cupti
