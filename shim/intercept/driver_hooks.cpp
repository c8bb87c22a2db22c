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
#include <mutex>

#include "shim/core/context_id.h"
#include "shim/intercept/dlsym_hook.h"
#include "shim/intercept/driver_api.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/log.h"
#include "shim/core/recorder.h"

using torchseal::ApiId;
using torchseal::Family;
using torchseal::HookScope;
using torchseal::recorder;

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
// in it once, so later pointers can be recognised by address.
std::mutex g_learn_mutex;
void *g_learned_from = nullptr;

void learn_real_addresses(void *pfn) {
  Dl_info info;
  if (!dladdr(pfn, &info) || !info.dli_fname) return;
  std::lock_guard<std::mutex> lock(g_learn_mutex);
  if (g_learned_from == info.dli_fbase) return;
  void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return;
  for (size_t i = 0; i < g_wrapped_count; ++i) {
    void *real = real_dlsym(h, g_wrapped[i].name);
    void *expected = nullptr;
    if (real && real != g_wrapped[i].wrapper)
      g_wrapped[i].real.compare_exchange_strong(expected, real);
  }
  g_learned_from = info.dli_fbase;
  dlclose(h);
}

}  // namespace

void *real_driver_function_of(Wrapped *w) {
  void *p = w->real.load(std::memory_order_acquire);
  if (p) return p;
  // Reached through our exported symbol: the real one is next in line.
  p = real_dlsym(RTLD_NEXT, w->name);
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
  static DriverQueries q = [] {
    DriverQueries d;
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
      d.ctx_get_current = reinterpret_cast<decltype(d.ctx_get_current)>(real_dlsym(h, "cuCtxGetCurrent"));
      d.ctx_get_device = reinterpret_cast<decltype(d.ctx_get_device)>(real_dlsym(h, "cuCtxGetDevice"));
      d.primary_ctx_get_state = reinterpret_cast<decltype(d.primary_ctx_get_state)>(
          real_dlsym(h, "cuDevicePrimaryCtxGetState"));
      d.device_get_count =
          reinterpret_cast<decltype(d.device_get_count)>(real_dlsym(h, "cuDeviceGetCount"));
      dlclose(h);
    }
    return d;
  }();
  return q;
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

template <typename Fn>
Fn real_of(ApiId id) {
  return reinterpret_cast<Fn>(real_driver_function(id));
}

void after_alloc(const HookScope &scope, CUresult rc, ApiId api, Family fam, uint64_t addr,
                 size_t bytes, CUstream stream) {
  if (!scope.record()) return;
  if (rc == CUDA_SUCCESS && addr) {
    recorder().on_alloc(api, fam, addr, bytes, current_device(), reinterpret_cast<uint64_t>(stream),
                        current_context_id());
  } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    recorder().on_oom(api, fam, bytes, current_device());
  }
}

template <typename Forward>
CUresult free_through(ApiId api, Family fam, uint64_t addr, CUstream stream, Forward forward) {
  HookScope scope;
  if (!scope.record() || !addr) return forward();
  auto token = recorder().on_free(api, fam, addr, reinterpret_cast<uint64_t>(stream));
  CUresult rc = forward();
  if (rc != CUDA_SUCCESS) recorder().undo_free(token);
  return rc;
}

// The primary context dies only when its last reference goes: ask the
// driver afterwards whether it is still active.
void teardown_if_primary_inactive(ApiId api, CUdevice dev) {
  auto f = driver_queries().primary_ctx_get_state;
  unsigned int flags = 0;
  int active = 1;
  if (f && f(dev, &flags, &active) == CUDA_SUCCESS && !active) recorder().on_teardown(api, dev, 0);
}

}  // namespace
}  // namespace torchseal

using torchseal::after_alloc;
using torchseal::free_through;
using torchseal::real_of;

#define TS_EXPORT extern "C" __attribute__((visibility("default")))
#define TS_MISSING CUDA_ERROR_NOT_INITIALIZED

TS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  auto real = real_of<decltype(&cuMemAlloc_v2)>(ApiId::cuMemAlloc_v2);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(dptr, bytesize);
  after_alloc(scope, rc, ApiId::cuMemAlloc_v2, Family::Device, dptr ? *dptr : 0, bytesize, nullptr);
  return rc;
}

TS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes) {
  auto real = real_of<decltype(&cuMemAllocPitch_v2)>(ApiId::cuMemAllocPitch_v2);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
  size_t bytes = (rc == CUDA_SUCCESS && pPitch) ? *pPitch * Height : WidthInBytes * Height;
  after_alloc(scope, rc, ApiId::cuMemAllocPitch_v2, Family::Device, dptr ? *dptr : 0, bytes,
              nullptr);
  return rc;
}

TS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  auto real = real_of<decltype(&cuMemFree_v2)>(ApiId::cuMemFree_v2);
  if (!real) return TS_MISSING;
  return free_through(ApiId::cuMemFree_v2, Family::Device, dptr, nullptr, [&] { return real(dptr); });
}

#define TS_DRV_ASYNC_ALLOC(fn)                                                           \
  TS_EXPORT CUresult fn(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {           \
    auto real = real_of<decltype(&fn)>(ApiId::fn);                                       \
    if (!real) return TS_MISSING;                                                        \
    HookScope scope;                                                                     \
    CUresult rc = real(dptr, bytesize, hStream);                                         \
    after_alloc(scope, rc, ApiId::fn, Family::StreamOrdered, dptr ? *dptr : 0, bytesize, \
                hStream);                                                                \
    return rc;                                                                           \
  }
TS_DRV_ASYNC_ALLOC(cuMemAllocAsync)
TS_DRV_ASYNC_ALLOC(cuMemAllocAsync_ptsz)

#define TS_DRV_POOL_ALLOC(fn)                                                                 \
  TS_EXPORT CUresult fn(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) { \
    auto real = real_of<decltype(&fn)>(ApiId::fn);                                            \
    if (!real) return TS_MISSING;                                                             \
    HookScope scope;                                                                          \
    CUresult rc = real(dptr, bytesize, pool, hStream);                                        \
    after_alloc(scope, rc, ApiId::fn, Family::StreamOrdered, dptr ? *dptr : 0, bytesize,      \
                hStream);                                                                     \
    return rc;                                                                                \
  }
TS_DRV_POOL_ALLOC(cuMemAllocFromPoolAsync)
TS_DRV_POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz)

#define TS_DRV_ASYNC_FREE(fn)                                                          \
  TS_EXPORT CUresult fn(CUdeviceptr dptr, CUstream hStream) {                         \
    auto real = real_of<decltype(&fn)>(ApiId::fn);                                     \
    if (!real) return TS_MISSING;                                                      \
    return free_through(ApiId::fn, Family::StreamOrdered, dptr, hStream,               \
                        [&] { return real(dptr, hStream); });                          \
  }
TS_DRV_ASYNC_FREE(cuMemFreeAsync)
TS_DRV_ASYNC_FREE(cuMemFreeAsync_ptsz)

TS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
  auto real = real_of<decltype(&cuMemAllocManaged)>(ApiId::cuMemAllocManaged);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(dptr, bytesize, flags);
  after_alloc(scope, rc, ApiId::cuMemAllocManaged, Family::Managed, dptr ? *dptr : 0, bytesize,
              nullptr);
  return rc;
}

TS_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
  auto real = real_of<decltype(&cuMemAllocHost_v2)>(ApiId::cuMemAllocHost_v2);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(pp, bytesize);
  after_alloc(scope, rc, ApiId::cuMemAllocHost_v2, Family::HostPinned,
              pp ? reinterpret_cast<uint64_t>(*pp) : 0, bytesize, nullptr);
  return rc;
}

TS_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  auto real = real_of<decltype(&cuMemHostAlloc)>(ApiId::cuMemHostAlloc);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(pp, bytesize, Flags);
  after_alloc(scope, rc, ApiId::cuMemHostAlloc, Family::HostPinned,
              pp ? reinterpret_cast<uint64_t>(*pp) : 0, bytesize, nullptr);
  return rc;
}

TS_EXPORT CUresult cuMemFreeHost(void *p) {
  auto real = real_of<decltype(&cuMemFreeHost)>(ApiId::cuMemFreeHost);
  if (!real) return TS_MISSING;
  return free_through(ApiId::cuMemFreeHost, Family::HostPinned, reinterpret_cast<uint64_t>(p),
                      nullptr, [&] { return real(p); });
}

// VMM: the leak unit is the physical allocation handle. A handle released
// while still mapped is not a leak (the driver frees it at the last unmap),
// so release ends our responsibility for it whatever its mappings.
TS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags) {
  auto real = real_of<decltype(&cuMemCreate)>(ApiId::cuMemCreate);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(handle, size, prop, flags);
  if (scope.record()) {
    int dev = (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? prop->location.id
                                                                            : torchseal::current_device();
    if (rc == CUDA_SUCCESS && handle)
      recorder().on_alloc(ApiId::cuMemCreate, Family::Vmm, *handle, size, dev, 0,
                          torchseal::current_context_id());
    else if (rc == CUDA_ERROR_OUT_OF_MEMORY)
      recorder().on_oom(ApiId::cuMemCreate, Family::Vmm, size, dev);
  }
  return rc;
}

TS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto real = real_of<decltype(&cuMemRelease)>(ApiId::cuMemRelease);
  if (!real) return TS_MISSING;
  return free_through(ApiId::cuMemRelease, Family::Vmm, handle, nullptr,
                      [&] { return real(handle); });
}

TS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags) {
  auto real = real_of<decltype(&cuMemMap)>(ApiId::cuMemMap);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(ptr, size, offset, handle, flags);
  if (scope.record() && rc == CUDA_SUCCESS) recorder().on_vmm_range(torchseal::Op::Map, ptr, size, handle);
  return rc;
}

TS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  auto real = real_of<decltype(&cuMemUnmap)>(ApiId::cuMemUnmap);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(ptr, size);
  if (scope.record() && rc == CUDA_SUCCESS) recorder().on_vmm_range(torchseal::Op::Unmap, ptr, size, 0);
  return rc;
}

TS_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                       CUdeviceptr addr, unsigned long long flags) {
  auto real = real_of<decltype(&cuMemAddressReserve)>(ApiId::cuMemAddressReserve);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(ptr, size, alignment, addr, flags);
  if (scope.record() && rc == CUDA_SUCCESS && ptr)
    recorder().on_vmm_range(torchseal::Op::Reserve, *ptr, size, 0);
  return rc;
}

TS_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  auto real = real_of<decltype(&cuMemAddressFree)>(ApiId::cuMemAddressFree);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(ptr, size);
  if (scope.record() && rc == CUDA_SUCCESS) recorder().on_vmm_range(torchseal::Op::Unreserve, ptr, size, 0);
  return rc;
}

TS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  auto real = real_of<decltype(&cuCtxDestroy_v2)>(ApiId::cuCtxDestroy_v2);
  if (!real) return TS_MISSING;
  HookScope scope;
  // Like CUPTI's CONTEXT_DESTROY_STARTING: collect before the driver frees.
  if (scope.record()) recorder().on_teardown(ApiId::cuCtxDestroy_v2, -1, torchseal::context_id_of(ctx));
  return real(ctx);
}

TS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  auto real = real_of<decltype(&cuDevicePrimaryCtxReset_v2)>(ApiId::cuDevicePrimaryCtxReset_v2);
  if (!real) return TS_MISSING;
  HookScope scope;
  if (scope.record()) recorder().on_teardown(ApiId::cuDevicePrimaryCtxReset_v2, dev, 0);
  return real(dev);
}

TS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  auto real = real_of<decltype(&cuDevicePrimaryCtxRelease_v2)>(ApiId::cuDevicePrimaryCtxRelease_v2);
  if (!real) return TS_MISSING;
  HookScope scope;
  CUresult rc = real(dev);
  if (scope.record() && rc == CUDA_SUCCESS)
    torchseal::teardown_if_primary_inactive(ApiId::cuDevicePrimaryCtxRelease_v2, dev);
  return rc;
}

// ---- cuGetProcAddress: hand out wrappers for the variant the driver chose ----

TS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus);
TS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

namespace torchseal {
Wrapped g_wrapped[] = {
// Every driver-layer row of the API table, and nothing else.
#define TS_WRAP_Runtime(id, name)
#define TS_WRAP_Driver(id, name) {name, ApiId::id, reinterpret_cast<void *>(&::id), {nullptr}},
#define TS_API(id, name, layer, family, role) TS_WRAP_##layer(id, name)
#include "report/model/api_table.def"
#undef TS_API
#undef TS_WRAP_Driver
#undef TS_WRAP_Runtime
    {"cuGetProcAddress_v2", ApiId::Unknown, reinterpret_cast<void *>(&::cuGetProcAddress_v2), {nullptr}},
    {"cuGetProcAddress", ApiId::Unknown, reinterpret_cast<void *>(&::cuGetProcAddress), {nullptr}},
};
const size_t g_wrapped_count = sizeof(g_wrapped) / sizeof(g_wrapped[0]);
}  // namespace torchseal

TS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus) {
  static torchseal::Wrapped *self = torchseal::find_by_name("cuGetProcAddress_v2");
  auto real = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(torchseal::real_driver_function_of(self));
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

TS_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
  static torchseal::Wrapped *self = torchseal::find_by_name("cuGetProcAddress");
  auto real = reinterpret_cast<decltype(&cuGetProcAddress)>(torchseal::real_driver_function_of(self));
  if (!real) return TS_MISSING;
  CUresult rc = real(symbol, pfn, cudaVersion, flags);
  if (rc == CUDA_SUCCESS && pfn && *pfn) *pfn = torchseal::wrap_driver_pointer(*pfn);
  return rc;
}
