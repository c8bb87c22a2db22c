// Interposers for the CUDA runtime's allocation and free entry points
// (docs/architecture.md, "Coverage"). Each one is thin: forward, then tell the recorder.
// Frees are reported *before* forwarding so the address cannot be handed out
// again in between; a free that then fails is undone.
#include <cuda_runtime_api.h>

#include "shim/intercept/driver_api.h"
#include "shim/runtime/lifecycle.h"
#include "shim/intercept/real_symbol.h"
#include "shim/core/recorder.h"

using torchseal::ApiId;
using torchseal::Family;
using torchseal::HookScope;
using torchseal::recorder;

// The per-thread-default-stream variants are exported by libcudart but only
// declared under __CUDART_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                         cudaStream_t stream);
cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream);
}

namespace {

int current_device() {
  if (torchseal::one_device()) return 0;
  TS_REAL(cudaGetDevice);
  int dev = -1;
  if (real && real(&dev) != cudaSuccess) dev = -1;
  return dev;
}

bool is_oom(cudaError_t e) { return e == cudaErrorMemoryAllocation; }

cudaError_t missing() { return cudaErrorInitializationError; }

void after_alloc(const HookScope &scope, cudaError_t rc, ApiId api, Family fam, const void *p,
                 size_t bytes, cudaStream_t stream) {
  if (!scope.record()) return;
  if (rc == cudaSuccess && p) {
    recorder().on_alloc(api, fam, reinterpret_cast<uint64_t>(p), bytes, current_device(),
                        reinterpret_cast<uint64_t>(stream), 0);
  } else if (is_oom(rc)) {
    recorder().on_oom(api, fam, bytes, current_device());
  }
}

template <typename Forward>
cudaError_t free_through(ApiId api, Family fam, void *p, cudaStream_t stream, Forward forward) {
  HookScope scope;
  // A null free is a documented no-op, not an event.
  if (!scope.record() || !p) return forward();
  auto token = recorder().on_free(api, fam, reinterpret_cast<uint64_t>(p),
                                  reinterpret_cast<uint64_t>(stream));
  cudaError_t rc = forward();
  if (rc != cudaSuccess) recorder().undo_free(token);
  return rc;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) cudaError_t cudaMalloc(void **devPtr, size_t size) {
  TS_REAL(cudaMalloc);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(devPtr, size);
  after_alloc(scope, rc, ApiId::cudaMalloc, Family::Device, devPtr ? *devPtr : nullptr, size,
              nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch,
                                                                   size_t width, size_t height) {
  TS_REAL(cudaMallocPitch);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(devPtr, pitch, width, height);
  size_t bytes = (rc == cudaSuccess && pitch) ? *pitch * height : width * height;
  after_alloc(scope, rc, ApiId::cudaMallocPitch, Family::Device, devPtr ? *devPtr : nullptr,
              bytes, nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaMalloc3D(cudaPitchedPtr *pitchedDevPtr,
                                                                cudaExtent extent) {
  TS_REAL(cudaMalloc3D);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(pitchedDevPtr, extent);
  size_t bytes = (rc == cudaSuccess && pitchedDevPtr)
                     ? pitchedDevPtr->pitch * extent.height * extent.depth
                     : extent.width * extent.height * extent.depth;
  after_alloc(scope, rc, ApiId::cudaMalloc3D, Family::Device,
              (rc == cudaSuccess && pitchedDevPtr) ? pitchedDevPtr->ptr : nullptr, bytes, nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaFree(void *devPtr) {
  TS_REAL(cudaFree);
  if (!real) return missing();
  return free_through(ApiId::cudaFree, Family::Device, devPtr, nullptr,
                      [&] { return real(devPtr); });
}

#define TS_ASYNC_ALLOC(fn)                                                               \
  __attribute__((visibility("default"))) cudaError_t fn(void **devPtr, size_t size,      \
                                                        cudaStream_t hStream) {          \
    TS_REAL(fn);                                                                         \
    if (!real) return missing();                                                         \
    HookScope scope;                                                                     \
    cudaError_t rc = real(devPtr, size, hStream);                                        \
    after_alloc(scope, rc, ApiId::fn, Family::StreamOrdered, devPtr ? *devPtr : nullptr, \
                size, hStream);                                                          \
    return rc;                                                                           \
  }
TS_ASYNC_ALLOC(cudaMallocAsync)
TS_ASYNC_ALLOC(cudaMallocAsync_ptsz)
#undef TS_ASYNC_ALLOC

#define TS_POOL_ALLOC(fn)                                                                  \
  __attribute__((visibility("default"))) cudaError_t fn(void **ptr, size_t size,           \
                                                        cudaMemPool_t memPool,             \
                                                        cudaStream_t stream) {             \
    TS_REAL(fn);                                                                           \
    if (!real) return missing();                                                           \
    HookScope scope;                                                                       \
    cudaError_t rc = real(ptr, size, memPool, stream);                                     \
    after_alloc(scope, rc, ApiId::fn, Family::StreamOrdered, ptr ? *ptr : nullptr, size,   \
                stream);                                                                   \
    return rc;                                                                             \
  }
TS_POOL_ALLOC(cudaMallocFromPoolAsync)
TS_POOL_ALLOC(cudaMallocFromPoolAsync_ptsz)
#undef TS_POOL_ALLOC

#define TS_ASYNC_FREE(fn)                                                                  \
  __attribute__((visibility("default"))) cudaError_t fn(void *devPtr, cudaStream_t hStream) { \
    TS_REAL(fn);                                                                           \
    if (!real) return missing();                                                           \
    return free_through(ApiId::fn, Family::StreamOrdered, devPtr, hStream,                 \
                        [&] { return real(devPtr, hStream); });                            \
  }
TS_ASYNC_FREE(cudaFreeAsync)
TS_ASYNC_FREE(cudaFreeAsync_ptsz)
#undef TS_ASYNC_FREE

__attribute__((visibility("default"))) cudaError_t cudaMallocManaged(void **devPtr, size_t size,
                                                                     unsigned int flags) {
  TS_REAL(cudaMallocManaged);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(devPtr, size, flags);
  after_alloc(scope, rc, ApiId::cudaMallocManaged, Family::Managed, devPtr ? *devPtr : nullptr,
              size, nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaMallocHost(void **ptr, size_t size) {
  TS_REAL(cudaMallocHost);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(ptr, size);
  after_alloc(scope, rc, ApiId::cudaMallocHost, Family::HostPinned, ptr ? *ptr : nullptr, size,
              nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaHostAlloc(void **pHost, size_t size,
                                                                 unsigned int flags) {
  TS_REAL(cudaHostAlloc);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(pHost, size, flags);
  after_alloc(scope, rc, ApiId::cudaHostAlloc, Family::HostPinned, pHost ? *pHost : nullptr,
              size, nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaFreeHost(void *ptr) {
  TS_REAL(cudaFreeHost);
  if (!real) return missing();
  return free_through(ApiId::cudaFreeHost, Family::HostPinned, ptr, nullptr,
                      [&] { return real(ptr); });
}

__attribute__((visibility("default"))) cudaError_t cudaDeviceReset(void) {
  TS_REAL(cudaDeviceReset);
  if (!real) return missing();
  HookScope scope;
  // Collect before the driver tears the context down, like CUPTI's
  // CONTEXT_DESTROY_STARTING: the leaks are the allocations it is about to drop.
  if (scope.record())
    recorder().on_teardown(ApiId::cudaDeviceReset, current_device(), 0);
  return real();
}

}  // extern "C"
