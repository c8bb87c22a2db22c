// Interposers for the CUDA runtime's allocation and free entry points
// (docs/architecture.md, "Coverage"). Each one is thin: forward, then hand the call's
// arguments to the core (hook_through.h; frees are reported before
// forwarding).
#include <cuda_runtime_api.h>

#include "shim/core/driver_api.h"
#include "shim/intercept/hook_through.h"
#include "shim/intercept/real_symbol.h"

using torchseal::ApiId;
using torchseal::call_args;
using torchseal::CallArgs;
using torchseal::free_through;
using torchseal::HookScope;

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

cudaError_t missing() { return cudaErrorInitializationError; }

uint64_t u64(const void *p) { return reinterpret_cast<uint64_t>(p); }

// The device is asked only for an event. Scalar parameters: the CallArgs
// lives only in here, in registers.
void report_alloc(const HookScope &scope, ApiId api, cudaError_t rc, const void *p, uint64_t bytes,
                  cudaStream_t stream) {
  if (!scope.record()) return;
  CallArgs c = call_args(api, u64(p), bytes, u64(stream), torchseal::result_of(rc));
  if (!torchseal::records_alloc(c)) return;
  c.device = current_device();
  torchseal::record_alloc(c);
}

// Allocations whose size is the requested size.
template <typename Forward>
cudaError_t alloc_through(ApiId api, void **out, size_t size, cudaStream_t stream,
                          Forward forward) {
  HookScope scope;
  cudaError_t rc = forward();
  report_alloc(scope, api, rc, out ? *out : nullptr, size, stream);
  return rc;
}

CallArgs free_args(ApiId api, void *p, cudaStream_t stream) {
  return call_args(api, u64(p), 0, u64(stream));
}

}  // namespace

extern "C" {

// Allocations of the requested `size` returned through `out`:
// (name, out, stream, (parameters), (arguments)).
#define TS_SIZED_ALLOC(fn, out, stream, params, args)                              \
  __attribute__((visibility("default"))) cudaError_t fn params {                   \
    TS_REAL(fn);                                                                   \
    if (!real) return missing();                                                   \
    return alloc_through(ApiId::fn, out, size, stream, [&] { return real args; }); \
  }
TS_SIZED_ALLOC(cudaMalloc, devPtr, nullptr, (void **devPtr, size_t size), (devPtr, size))
TS_SIZED_ALLOC(cudaMallocAsync, devPtr, hStream, (void **devPtr, size_t size, cudaStream_t hStream),
               (devPtr, size, hStream))
TS_SIZED_ALLOC(cudaMallocAsync_ptsz, devPtr, hStream,
               (void **devPtr, size_t size, cudaStream_t hStream), (devPtr, size, hStream))
TS_SIZED_ALLOC(cudaMallocFromPoolAsync, ptr, stream,
               (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
               (ptr, size, memPool, stream))
TS_SIZED_ALLOC(cudaMallocFromPoolAsync_ptsz, ptr, stream,
               (void **ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
               (ptr, size, memPool, stream))
TS_SIZED_ALLOC(cudaMallocManaged, devPtr, nullptr, (void **devPtr, size_t size, unsigned int flags),
               (devPtr, size, flags))
TS_SIZED_ALLOC(cudaMallocHost, ptr, nullptr, (void **ptr, size_t size), (ptr, size))
TS_SIZED_ALLOC(cudaHostAlloc, pHost, nullptr, (void **pHost, size_t size, unsigned int flags),
               (pHost, size, flags))
#undef TS_SIZED_ALLOC

__attribute__((visibility("default"))) cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch,
                                                                   size_t width, size_t height) {
  TS_REAL(cudaMallocPitch);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(devPtr, pitch, width, height);
  uint64_t bytes = torchseal::pitched_bytes(rc == cudaSuccess, pitch, width, height);
  report_alloc(scope, ApiId::cudaMallocPitch, rc, devPtr ? *devPtr : nullptr, bytes, nullptr);
  return rc;
}

__attribute__((visibility("default"))) cudaError_t cudaMalloc3D(cudaPitchedPtr *pitchedDevPtr,
                                                                cudaExtent extent) {
  TS_REAL(cudaMalloc3D);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(pitchedDevPtr, extent);
  bool ok = rc == cudaSuccess && pitchedDevPtr;
  uint64_t bytes = torchseal::pitched_bytes(ok, ok ? &pitchedDevPtr->pitch : nullptr, extent.width,
                                            extent.height * extent.depth);
  report_alloc(scope, ApiId::cudaMalloc3D, rc, ok ? pitchedDevPtr->ptr : nullptr, bytes, nullptr);
  return rc;
}

// The caller's own range becomes a registration: its leak unit is the range.
__attribute__((visibility("default"))) cudaError_t cudaHostRegister(void *ptr, size_t size,
                                                                    unsigned int flags) {
  TS_REAL(cudaHostRegister);
  if (!real) return missing();
  HookScope scope;
  cudaError_t rc = real(ptr, size, flags);
  report_alloc(scope, ApiId::cudaHostRegister, rc, ptr, size, nullptr);
  return rc;
}

// Frees of `p`: (name, p, stream, (parameters), (arguments)).
#define TS_FREE(fn, p, stream, params, args)                                         \
  __attribute__((visibility("default"))) cudaError_t fn params {                     \
    TS_REAL(fn);                                                                     \
    if (!real) return missing();                                                     \
    return free_through(free_args(ApiId::fn, p, stream), [&] { return real args; }); \
  }
TS_FREE(cudaFree, devPtr, nullptr, (void *devPtr), (devPtr))
TS_FREE(cudaFreeAsync, devPtr, hStream, (void *devPtr, cudaStream_t hStream), (devPtr, hStream))
TS_FREE(cudaFreeAsync_ptsz, devPtr, hStream, (void *devPtr, cudaStream_t hStream),
        (devPtr, hStream))
TS_FREE(cudaFreeHost, ptr, nullptr, (void *ptr), (ptr))
TS_FREE(cudaHostUnregister, ptr, nullptr, (void *ptr), (ptr))
#undef TS_FREE

__attribute__((visibility("default"))) cudaError_t cudaDeviceReset(void) {
  TS_REAL(cudaDeviceReset);
  if (!real) return missing();
  HookScope scope;
  // The device is asked only when recording.
  if (scope.record()) {
    CallArgs c = call_args(ApiId::cudaDeviceReset);
    c.device = current_device();
    if (torchseal::tears_down(c.api, torchseal::CallSite::Enter, c)) torchseal::record_teardown(c);
  }
  return real();
}

}  // extern "C"
