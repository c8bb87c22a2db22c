// Wrappers for the driver's allocation, free, VMM and teardown entry points,
// however the program reaches them: the exported symbol (linked with -lcuda),
// dlsym on libcuda (JAX/XLA, static cudart), or a cuGetProcAddress /
// cudaGetDriverEntryPoint pointer (every runtime, static or shared).
//
// A driver call made from inside a hooked runtime call is not recorded again
// (HookScope nesting): one user allocation is one event, under the runtime
// API's name.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>

#include "common/util/log.h"
#include "common/util/fork_safe.h"
#include "shim/core/activation.h"
#include "shim/core/context_id.h"
#include "shim/core/driver_api.h"
#include "shim/intercept/dlsym_hook.h"
#include "shim/intercept/hook_through.h"

using torchseal::ApiId;
using torchseal::CallArgs;
using torchseal::HookScope;

namespace torchseal {

struct Wrapped {
  const char *name;
  ApiId id;  // ApiId::Unknown for non-allocation entry points (cuGetProcAddress)
  void *wrapper;
  std::atomic<void *> real;
};

// Defined below, in the extern "C" block.
extern Wrapped g_wrapped[];
extern const size_t g_wrapped_count;

namespace {

Wrapped *find_by_name(const char *name) {
  for (size_t i = 0; i < g_wrapped_count; ++i)
    if (strcmp(g_wrapped[i].name, name) == 0) return &g_wrapped[i];
  return nullptr;
}

Wrapped *find_by_id(ApiId id) {
  for (size_t i = 0; i < g_wrapped_count; ++i)
    if (g_wrapped[i].id == id) return &g_wrapped[i];
  return nullptr;
}

// The driver library that handed out `pfn`: every wrapped name is resolved
// in it once, so later pointers can be recognised by address. No lock of
// ours is held across the loader's calls (dlopen, dlsym take its lock, and a
// library's constructor running under that lock can ask cuGetProcAddress,
// which comes here): two threads may both resolve, and each slot takes the
// first answer.
std::atomic<void *> g_learned_from{nullptr};

void learn_real_addresses(void *pfn) {
  Dl_info info;
  if (!dladdr(pfn, &info) || !info.dli_fname) return;
  if (g_learned_from.load(std::memory_order_acquire) == info.dli_fbase) return;
  void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return;
  for (size_t i = 0; i < g_wrapped_count; ++i) {
    void *real = real_dlsym(h, g_wrapped[i].name);
    void *expected = nullptr;
    if (real && real != g_wrapped[i].wrapper)
      g_wrapped[i].real.compare_exchange_strong(expected, real);
  }
  g_learned_from.store(info.dli_fbase, std::memory_order_release);
  dlclose(h);
}

}  // namespace

static __attribute__((noinline)) void *resolve_real(Wrapped *w) {
  // Reached through our exported symbol: the real one is next in line.
  void *p = real_dlsym(RTLD_NEXT, w->name);
  if (!p) {
    // Or libcuda was dlopen'ed RTLD_LOCAL and only handed out pointers.
    if (void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
      p = real_dlsym(h, w->name);
      dlclose(h);
    }
  }
  if (p == w->wrapper) p = nullptr;
  if (p) w->real.store(p, std::memory_order_release);
  return p;
}

void *real_driver_function_of(Wrapped *w) {
  void *p = w->real.load(std::memory_order_acquire);
  return p ? p : resolve_real(w);
}

void *real_driver_function(ApiId id) {
  Wrapped *w = find_by_id(id);
  return w ? real_driver_function_of(w) : nullptr;
}

void *wrap_driver_pointer(void *pfn) {
  if (!pfn) return pfn;
  for (size_t i = 0; i < g_wrapped_count; ++i) {
    if (pfn == g_wrapped[i].wrapper) return pfn;
    if (pfn == g_wrapped[i].real.load(std::memory_order_acquire)) return g_wrapped[i].wrapper;
  }
  learn_real_addresses(pfn);
  for (size_t i = 0; i < g_wrapped_count; ++i)
    if (pfn == g_wrapped[i].real.load(std::memory_order_acquire)) return g_wrapped[i].wrapper;
  return pfn;
}

void *driver_wrapper_for_name(const char *name, ApiId *id) {
  Wrapped *w = find_by_name(name);
  if (!w) return nullptr;
  if (id) *id = w->id;
  return w->wrapper;
}

const DriverQueries &driver_queries() {
  static constinit Lazy<DriverQueries> q;
  return q.get([] {
    DriverQueries d;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      d.ctx_get_current =
          reinterpret_cast<decltype(d.ctx_get_current)>(real_dlsym(h, "cuCtxGetCurrent"));
      d.ctx_get_device =
          reinterpret_cast<decltype(d.ctx_get_device)>(real_dlsym(h, "cuCtxGetDevice"));
      d.primary_ctx_get_state = reinterpret_cast<decltype(d.primary_ctx_get_state)>(
          real_dlsym(h, "cuDevicePrimaryCtxGetState"));
      d.device_get_count =
          reinterpret_cast<decltype(d.device_get_count)>(real_dlsym(h, "cuDeviceGetCount"));
      d.capture_info_v3 =
          reinterpret_cast<decltype(d.capture_info_v3)>(real_dlsym(h, "cuStreamGetCaptureInfo_v3"));
      d.capture_info_v2 =
          reinterpret_cast<decltype(d.capture_info_v2)>(real_dlsym(h, "cuStreamGetCaptureInfo_v2"));
      dlclose(h);
    }
    return d;
  });
}

uint64_t capture_graph_of(uint64_t stream) {
  const DriverQueries &q = driver_queries();
  CUstream s = reinterpret_cast<CUstream>(stream);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  CUresult rc =
      q.capture_info_v3 ? q.capture_info_v3(s, &status, nullptr, &graph, nullptr, nullptr, nullptr)
      : q.capture_info_v2 ? q.capture_info_v2(s, &status, nullptr, &graph, nullptr, nullptr)
                          : CUDA_ERROR_NOT_SUPPORTED;
  if (rc != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE) return 0;
  return reinterpret_cast<uint64_t>(graph);
}

bool one_device() {
  // Device ordinals are per process and fixed once CUDA is initialised
  // (before that the driver says CUDA_ERROR_NOT_INITIALIZED; ask again later).
  static std::atomic<int> count{0};
  int c = count.load(std::memory_order_relaxed);
  if (c == 0) {
    auto f = driver_queries().device_get_count;
    int n = 0;
    if (f && f(&n) == CUDA_SUCCESS && n > 0) count.store(c = n, std::memory_order_relaxed);
  }
  return c == 1;
}

namespace {

int current_device() {
  if (one_device()) return 0;
  CUdevice dev = -1;
  auto f = driver_queries().ctx_get_device;
  if (!f || f(&dev) != CUDA_SUCCESS) return -1;
  return dev;
}

// Contexts are named by a small stable id so a cuCtxDestroy can find its
// allocations without keeping CUcontext pointers (which the driver reuses).
uint32_t current_context_id() {
  CUcontext ctx = nullptr;
  auto f = driver_queries().ctx_get_current;
  if (!f || f(&ctx) != CUDA_SUCCESS || !ctx) return 0;
  return context_id_of(ctx);
}

// What a nested call forwards to without a frame of its own: the real
// function as the wrapper's last event path found it.
template <ApiId kId>
inline std::atomic<void *> g_forward{nullptr};

// The real function behind a wrapper, its table entry found once per
// wrapper.
template <typename Fn, ApiId kId>
Fn real_of() {
  static constinit Resolved<Wrapped *> slot;
  Wrapped *self = slot.get([] { return find_by_id(kId); });
  void *real = self ? real_driver_function_of(self) : nullptr;
  // Written only when it changes: a store on every event would bounce the
  // line between the allocating threads.
  if (real && g_forward<kId>.load(std::memory_order_relaxed) != real)
    g_forward<kId>.store(real, std::memory_order_relaxed);
  return reinterpret_cast<Fn>(real);
}

// The real function for a nested call, or null until an event path of the
// same wrapper has run (the caller then takes that path, which forwards a
// nested call too).
template <typename Fn, ApiId kId>
__attribute__((always_inline)) inline Fn nested_forward() {
  return reinterpret_cast<Fn>(g_forward<kId>.load(std::memory_order_relaxed));
}

// The device and context are asked only for an event (the device only when
// the call does not name one). Scalar parameters: the CallArgs lives only in
// here, in registers.
void report_alloc(const HookScope &scope, ApiId api, CUresult rc, uint64_t addr, uint64_t bytes,
                  CUstream stream = nullptr, int device = -1) {
  if (!scope.record()) return;
  CallArgs c = call_args(api, addr, bytes, reinterpret_cast<uint64_t>(stream), result_of(rc));
  if (!records_alloc(c)) return;
  c.device = device >= 0 ? device : current_device();
  c.context = current_context_id();
  record_alloc(c);
}

// Allocations of the requested size returning a CUdeviceptr.
template <typename Forward>
CUresult alloc_through(ApiId api, CUdeviceptr *dptr, size_t bytesize, CUstream stream,
                       Forward forward) {
  HookScope scope;
  CUresult rc = forward();
  report_alloc(scope, api, rc, dptr ? *dptr : 0, bytesize, stream);
  return rc;
}

// Pinned host allocations returning a host pointer.
template <typename Forward>
CUresult host_alloc_through(ApiId api, void **pp, size_t bytesize, Forward forward) {
  HookScope scope;
  CUresult rc = forward();
  report_alloc(scope, api, rc, pp ? reinterpret_cast<uint64_t>(*pp) : 0, bytesize);
  return rc;
}

// VMM address-space calls: timeline only.
template <typename Forward>
CUresult vmm_range_through(CallArgs c, Forward forward) {
  HookScope scope;
  CUresult rc = forward();
  c.result = result_of(rc);
  if (scope.record()) record_vmm_range(c);
  return rc;
}

// Graph calls: recorded after the call returns, with what it filled in
// (`after` reads the outputs once the driver has written them).
template <typename Forward, typename After>
CUresult graph_through(CallArgs c, Forward forward, After after) {
  HookScope scope;
  CUresult rc = forward();
  if (!scope.record()) return rc;
  c.result = result_of(rc);
  if (rc == CUDA_SUCCESS) after(c);
  record_graph_call(c);
  return rc;
}

}  // namespace
}  // namespace torchseal

using torchseal::alloc_through;
using torchseal::call_args;
using torchseal::free_through;
using torchseal::graph_through;
using torchseal::host_alloc_through;
using torchseal::nested_forward;
using torchseal::real_of;
using torchseal::teardown_through;
using torchseal::vmm_range_through;

#define TS_EXPORT extern "C" __attribute__((visibility("default")))
#define TS_MISSING CUDA_ERROR_NOT_INITIALIZED
#define TS_DRV_REAL(fn)                            \
  auto real = real_of<decltype(&fn), ApiId::fn>(); \
  if (!real) return TS_MISSING

// A nested call (the runtime's own driver call under a hooked runtime
// allocation: every cudaMalloc and cudaFree) is forwarded before the
// wrapper sets up a frame; the event's path, `body` in fn##_event, is a
// function of its own entered by a tail call, so the frame HookScope notes
// returns straight to the wrapper's caller.
#define TS_DRV_NESTED_FORWARD(fn, params, args, body)                               \
  namespace {                                                                       \
  __attribute__((noinline)) CUresult fn##_event params {                            \
    TS_DRV_REAL(fn);                                                                \
    body;                                                                           \
  }                                                                                 \
  }                                                                                 \
  TS_EXPORT CUresult fn params {                                                    \
    if (torchseal::hook_nested())                                                   \
      if (auto real = nested_forward<decltype(&fn), ApiId::fn>()) return real args; \
    return fn##_event args;                                                         \
  }

// Allocations of the requested `bytesize` returned through `dptr`:
// (name, stream, (parameters), (arguments)).
#define TS_DRV_SIZED_ALLOC(fn, stream, params, args) \
  TS_DRV_NESTED_FORWARD(                             \
      fn, params, args,                              \
      return alloc_through(ApiId::fn, dptr, bytesize, stream, [&] { return real args; }))
TS_DRV_SIZED_ALLOC(cuMemAlloc_v2, nullptr, (CUdeviceptr * dptr, size_t bytesize), (dptr, bytesize))
TS_DRV_SIZED_ALLOC(cuMemAllocAsync, hStream,
                   (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
                   (dptr, bytesize, hStream))
TS_DRV_SIZED_ALLOC(cuMemAllocAsync_ptsz, hStream,
                   (CUdeviceptr * dptr, size_t bytesize, CUstream hStream),
                   (dptr, bytesize, hStream))
TS_DRV_SIZED_ALLOC(cuMemAllocFromPoolAsync, hStream,
                   (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                   (dptr, bytesize, pool, hStream))
TS_DRV_SIZED_ALLOC(cuMemAllocFromPoolAsync_ptsz, hStream,
                   (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
                   (dptr, bytesize, pool, hStream))
TS_DRV_SIZED_ALLOC(cuMemAllocManaged, nullptr,
                   (CUdeviceptr * dptr, size_t bytesize, unsigned int flags),
                   (dptr, bytesize, flags))
#undef TS_DRV_SIZED_ALLOC

TS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes) {
  TS_DRV_REAL(cuMemAllocPitch_v2);
  HookScope scope;
  CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  uint64_t bytes = torchseal::pitched_bytes(rc == CUDA_SUCCESS, pPitch, WidthInBytes, Height);
  torchseal::report_alloc(scope, ApiId::cuMemAllocPitch_v2, rc, dptr ? *dptr : 0, bytes);
  return rc;
}

TS_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  TS_DRV_REAL(cuMemAllocHost_v2);
  return host_alloc_through(ApiId::cuMemAllocHost_v2, pp, bytesize,
                            [&] { return real(pp, bytesize); });
}

TS_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  TS_DRV_REAL(cuMemHostAlloc);
  return host_alloc_through(ApiId::cuMemHostAlloc, pp, bytesize,
                            [&] { return real(pp, bytesize, Flags); });
}

// Host ranges the caller registers: (p, bytesize) is the leak unit. (The
// pre-6.5 cuMemHostRegister is left alone: cuGetProcAddress and cuda.h give
// _v2 to everything built since.)
TS_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
  TS_DRV_REAL(cuMemHostRegister_v2);
  return host_alloc_through(ApiId::cuMemHostRegister_v2, &p, bytesize,
                            [&] { return real(p, bytesize, Flags); });
}

// Frees of `addr`: (name, addr, stream, (parameters), (arguments)).
#define TS_DRV_FREE(fn, addr, stream, params, args)                                          \
  TS_DRV_NESTED_FORWARD(                                                                     \
      fn, params, args,                                                                      \
      return free_through(call_args(ApiId::fn, addr, 0, reinterpret_cast<uint64_t>(stream)), \
                          [&] { return real args; }))
TS_DRV_FREE(cuMemFree_v2, dptr, nullptr, (CUdeviceptr dptr), (dptr))
TS_DRV_FREE(cuMemFreeAsync, dptr, hStream, (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))
TS_DRV_FREE(cuMemFreeAsync_ptsz, dptr, hStream, (CUdeviceptr dptr, CUstream hStream),
            (dptr, hStream))
TS_DRV_FREE(cuMemFreeHost, reinterpret_cast<uint64_t>(p), nullptr, (void *p), (p))
TS_DRV_FREE(cuMemHostUnregister, reinterpret_cast<uint64_t>(p), nullptr, (void *p), (p))
// VMM: a handle's release ends our responsibility for it (see cuMemCreate).
TS_DRV_FREE(cuMemRelease, handle, nullptr, (CUmemGenericAllocationHandle handle), (handle))
#undef TS_DRV_FREE
#undef TS_DRV_NESTED_FORWARD

// VMM: the leak unit is the physical allocation handle. A handle released
// while still mapped is not a leak (the driver frees it at the last unmap),
// so release ends our responsibility for it whatever its mappings.
TS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
  TS_DRV_REAL(cuMemCreate);
  HookScope scope;
  CUresult rc = real(handle, size, prop, flags);
  torchseal::report_alloc(scope, ApiId::cuMemCreate, rc, handle ? *handle : 0, size, nullptr,
                          torchseal::vmm_create_device(prop));
  return rc;
}

// VMM: a reference to the handle mapped at `addr` (recorded when it
// succeeded; its release then balances it: Recorder::on_vmm_retain).
TS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
  TS_DRV_REAL(cuMemRetainAllocationHandle);
  HookScope scope;
  CUresult rc = real(handle, addr);
  if (scope.record() && rc == CUDA_SUCCESS && handle) {
    CallArgs c = call_args(ApiId::cuMemRetainAllocationHandle, *handle, 0);
    c.result = torchseal::CallResult::Ok;
    torchseal::record_vmm_retain(c);
  }
  return rc;
}

TS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
  TS_DRV_REAL(cuMemMap);
  CallArgs c = call_args(ApiId::cuMemMap, ptr, size);
  c.handle = handle;
  return vmm_range_through(c, [&] { return real(ptr, size, offset, handle, flags); });
}

TS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  TS_DRV_REAL(cuMemUnmap);
  return vmm_range_through(call_args(ApiId::cuMemUnmap, ptr, size),
                           [&] { return real(ptr, size); });
}

TS_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags) {
  TS_DRV_REAL(cuMemAddressReserve);
  HookScope scope;
  CUresult rc = real(ptr, size, alignment, addr, flags);
  if (scope.record() && rc == CUDA_SUCCESS && ptr)
    torchseal::record_vmm_range(call_args(ApiId::cuMemAddressReserve, *ptr, size));
  return rc;
}

TS_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  TS_DRV_REAL(cuMemAddressFree);
  return vmm_range_through(call_args(ApiId::cuMemAddressFree, ptr, size),
                           [&] { return real(ptr, size); });
}

TS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  TS_DRV_REAL(cuCtxDestroy_v2);
  CallArgs c = call_args(ApiId::cuCtxDestroy_v2);
  c.context = torchseal::context_id_of(ctx);
  return teardown_through(c, [&] { return real(ctx); });
}

TS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  TS_DRV_REAL(cuDevicePrimaryCtxReset_v2);
  CallArgs c = call_args(ApiId::cuDevicePrimaryCtxReset_v2);
  c.device = dev;
  return teardown_through(c, [&] { return real(dev); });
}

TS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  TS_DRV_REAL(cuDevicePrimaryCtxRelease_v2);
  CallArgs c = call_args(ApiId::cuDevicePrimaryCtxRelease_v2);
  c.device = dev;
  return teardown_through(c, [&] { return real(dev); });
}

// ---- CUDA graphs: memory nodes, instantiation, launch, capture ----

namespace {
uint64_t u64(const void *p) { return reinterpret_cast<uint64_t>(p); }
}  // namespace

TS_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies, size_t numDependencies,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
  TS_DRV_REAL(cuGraphAddMemAllocNode);
  CallArgs c = call_args(ApiId::cuGraphAddMemAllocNode);
  c.graph = u64(hGraph);
  return graph_through(
      c, [&] { return real(phGraphNode, hGraph, dependencies, numDependencies, nodeParams); },
      [&](CallArgs &a) {
        a.addr = nodeParams ? nodeParams->dptr : 0;
        a.size = nodeParams ? nodeParams->bytesize : 0;
        a.device = torchseal::graph_node_device(nodeParams);
        if (a.device < 0) a.device = torchseal::current_device();
        a.context = torchseal::current_context_id();
      });
}

TS_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         CUdeviceptr dptr) {
  TS_DRV_REAL(cuGraphAddMemFreeNode);
  CallArgs c = call_args(ApiId::cuGraphAddMemFreeNode, dptr);
  c.graph = u64(hGraph);
  return graph_through(
      c, [&] { return real(phGraphNode, hGraph, dependencies, numDependencies, dptr); },
      [](CallArgs &) {});
}

TS_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                               unsigned long long flags) {
  TS_DRV_REAL(cuGraphInstantiateWithFlags);
  CallArgs c = call_args(ApiId::cuGraphInstantiateWithFlags);
  c.graph = u64(hGraph);
  return graph_through(
      c, [&] { return real(phGraphExec, hGraph, flags); },
      [&](CallArgs &a) { a.exec = phGraphExec ? u64(*phGraphExec) : 0; });
}

#define TS_DRV_INSTANTIATE_PARAMS(fn)                                        \
  TS_EXPORT CUresult fn(CUgraphExec *phGraphExec, CUgraph hGraph,            \
                        CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams) {  \
    TS_DRV_REAL(fn);                                                         \
    CallArgs c = call_args(ApiId::fn);                                       \
    c.graph = u64(hGraph);                                                   \
    return graph_through(                                                    \
        c, [&] { return real(phGraphExec, hGraph, instantiateParams); },     \
        [&](CallArgs &a) { a.exec = phGraphExec ? u64(*phGraphExec) : 0; }); \
  }
TS_DRV_INSTANTIATE_PARAMS(cuGraphInstantiateWithParams)
TS_DRV_INSTANTIATE_PARAMS(cuGraphInstantiateWithParams_ptsz)
#undef TS_DRV_INSTANTIATE_PARAMS

#define TS_DRV_GRAPH_LAUNCH(fn)                                           \
  TS_EXPORT CUresult fn(CUgraphExec hGraphExec, CUstream hStream) {       \
    TS_DRV_REAL(fn);                                                      \
    CallArgs c = call_args(ApiId::fn, 0, 0, u64(hStream));                \
    c.exec = u64(hGraphExec);                                             \
    return graph_through(                                                 \
        c, [&] { return real(hGraphExec, hStream); }, [](CallArgs &) {}); \
  }
TS_DRV_GRAPH_LAUNCH(cuGraphLaunch)
TS_DRV_GRAPH_LAUNCH(cuGraphLaunch_ptsz)
#undef TS_DRV_GRAPH_LAUNCH

TS_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  TS_DRV_REAL(cuGraphExecDestroy);
  CallArgs c = call_args(ApiId::cuGraphExecDestroy);
  c.exec = u64(hGraphExec);
  return graph_through(
      c, [&] { return real(hGraphExec); }, [](CallArgs &) {});
}

TS_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
  TS_DRV_REAL(cuGraphDestroy);
  CallArgs c = call_args(ApiId::cuGraphDestroy);
  c.graph = u64(hGraph);
  return graph_through(
      c, [&] { return real(hGraph); }, [](CallArgs &) {});
}

#define TS_DRV_CAPTURE(fn, params, args)                                                         \
  TS_EXPORT CUresult fn params {                                                                 \
    TS_DRV_REAL(fn);                                                                             \
    return graph_through(                                                                        \
        call_args(ApiId::fn, 0, 0, u64(hStream)), [&] { return real args; }, [](CallArgs &) {}); \
  }
TS_DRV_CAPTURE(cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode),
               (hStream, mode))
TS_DRV_CAPTURE(cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode),
               (hStream, mode))
TS_DRV_CAPTURE(cuStreamEndCapture, (CUstream hStream, CUgraph *phGraph), (hStream, phGraph))
TS_DRV_CAPTURE(cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph *phGraph), (hStream, phGraph))
#undef TS_DRV_CAPTURE

// ---- cuGetProcAddress: hand out wrappers for the variant the driver chose ----

TS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus);
TS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags);
TS_EXPORT CUresult cuInit(unsigned int Flags);

namespace torchseal {
Wrapped g_wrapped[] = {
// Every driver-layer row of the API table, and nothing else.
#define TS_WRAP_Runtime(id, name)
#define TS_WRAP_Driver(id, name) {name, ApiId::id, reinterpret_cast<void *>(&::id), {nullptr}},
#define TS_API(id, name, layer, family, role) TS_WRAP_##layer(id, name)
#include "common/model/api_table.def"
#undef TS_API
#undef TS_WRAP_Driver
#undef TS_WRAP_Runtime
    {"cuGetProcAddress_v2",
     ApiId::Unknown,
     reinterpret_cast<void *>(&::cuGetProcAddress_v2),
     {nullptr}},
    {"cuGetProcAddress", ApiId::Unknown, reinterpret_cast<void *>(&::cuGetProcAddress), {nullptr}},
    {"cuInit", ApiId::Unknown, reinterpret_cast<void *>(&::cuInit), {nullptr}},
};
const size_t g_wrapped_count = sizeof(g_wrapped) / sizeof(g_wrapped[0]);
}  // namespace torchseal

TS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus) {
  static constinit torchseal::Resolved<torchseal::Wrapped *> slot;
  torchseal::Wrapped *self = slot.get([] { return torchseal::find_by_name("cuGetProcAddress_v2"); });
  auto real =
      reinterpret_cast<decltype(&cuGetProcAddress_v2)>(torchseal::real_driver_function_of(self));
  if (!real) {
    if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return TS_MISSING;
  }
  // The driver picks the variant (cudaVersion, ptsz flags) and fills
  // symbolStatus; we only swap in our wrapper for what it picked.
  CUresult rc = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = torchseal::wrap_driver_pointer(*pfn);
  return rc;
}

TS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags) {
  static constinit torchseal::Resolved<torchseal::Wrapped *> slot;
  torchseal::Wrapped *self = slot.get([] { return torchseal::find_by_name("cuGetProcAddress"); });
  auto real =
      reinterpret_cast<decltype(&cuGetProcAddress)>(torchseal::real_driver_function_of(self));
  if (!real) return TS_MISSING;
  CUresult rc = real(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = torchseal::wrap_driver_pointer(*pfn);
  return rc;
}

// Every runtime initialises the driver through here (a program that only
// asks for the device count allocates nothing, yet was active).
TS_EXPORT CUresult cuInit(unsigned int Flags) {
  static constinit torchseal::Resolved<torchseal::Wrapped *> slot;
  torchseal::Wrapped *self = slot.get([] { return torchseal::find_by_name("cuInit"); });
  auto real = reinterpret_cast<decltype(&cuInit)>(torchseal::real_driver_function_of(self));
  if (!real) return TS_MISSING;
  CUresult rc = real(Flags);
  if (rc == CUDA_SUCCESS) torchseal::note_cuda_initialised();
  return rc;
}
