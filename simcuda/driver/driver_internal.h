// Shared state of simcuda's driver (libcuda.so.1). Every mutable structure is
// protected by one process-wide mutex (driver_mutex), except the hot path of
// small linear allocations (small_blocks.cpp): cuMemAlloc/cuMemFree of up to
// kSmallMax bytes take only the lock of one allocator shard, so threads that
// allocate at once do not serialise on the driver (a real driver sub-allocates
// small requests too). Lock order: driver_mutex, then shard locks in index
// order. Device capacity is an atomic counter (shards hold batches of it as
// credit) and context liveness an atomic flag, so the hot path needs the
// mutex for neither. Functions suffixed _locked expect driver_mutex
// held. Callbacks to CUPTI are always emitted without any lock, so a tool may
// call back into the driver from its callback.
#pragma once

#include <cuda.h>
#include <cupti_callbacks.h>
#include <sys/types.h>
#include <cupti_driver_cbid.h>
#include <generated_cuda_meta.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <type_traits>
#include <vector>

#include "../immortal.h"
#include "../simcuda_hooks.h"

namespace simcuda {
// One of the driver's own threads (driver_threads.cpp), asleep until woken.
struct DriverThread {
    int wake_fd = -1;
    pid_t owner = 0;  // the process that started it
};
DriverThread start_driver_thread(const char *name);
void stop_driver_thread(DriverThread &t);
}  // namespace simcuda

struct CUctx_st {
    int device;
    std::atomic<uint32_t> uid;  // renewed when a primary context is revived
    bool primary;
    // Read without the driver mutex by the allocation hot path; cleared
    // under the mutex before a dying context's allocations are freed.
    std::atomic<bool> alive;
    // The context's event-handler thread, while it is alive.
    simcuda::DriverThread events;
};

struct CUgraph_st;

struct CUstream_st {
    CUctx_st *ctx;
    unsigned flags;
    int priority;
    // Stream capture (driver_graph.cpp): the graph being captured into.
    CUgraph_st *capture = nullptr;
    cuuint64_t capture_id = 0;
};

struct CUevent_st {
    unsigned flags;
    bool recorded;
    std::chrono::steady_clock::time_point when;
};

struct CUmemPoolHandle_st {
    int device;
    bool is_default;
    cuuint64_t release_threshold;
    int reuse_follow_event, reuse_opportunistic, reuse_internal;
    uint64_t used, used_high, reserved, reserved_high;
    // Chunks reserved from the device but not handed out: size -> address.
    std::multimap<size_t, uintptr_t> cached;
};

namespace simcuda {

constexpr size_t kAlign = 512;                  // linear allocation alignment
constexpr size_t kGranularity = 2u << 20;       // VMM and pool chunk size, slab size
constexpr size_t kSmallMax = 1u << 20;          // largest sharded allocation
constexpr int kMaxDevices = 16;                 // SIMCUDA_DEVICES limit

struct Config {
    uint64_t capacity;
    int devices;
};
const Config &config();
bool initialized();
std::mutex &driver_mutex();
using Lock = std::lock_guard<std::mutex>;

#define SIM_REQUIRE_INIT()                        \
    do {                                          \
        if (!::simcuda::initialized())            \
            return CUDA_ERROR_NOT_INITIALIZED;    \
    } while (0)

constexpr size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// ---- device heap: address arena, shadow storage, capacity accounting ----
bool heap_init();
uintptr_t arena_base();
size_t arena_span();
bool va_carve(size_t size, size_t align, uintptr_t hint, uintptr_t *out);
void va_release(uintptr_t p, size_t size);
// Capacity accounting. The device counter is atomic; allocator shards hold
// part of it as credit (charged, not yet used), so the small-allocation hot
// path rarely writes the shared counter. try_charge is lock-free and may
// fail while shards hold credit; charge (driver mutex held) takes that
// credit back first, so it fails, changing nothing, exactly when the device
// would exceed its capacity.
bool try_charge(int dev, uint64_t bytes);
bool charge(int dev, uint64_t bytes);
void uncharge(int dev, uint64_t bytes);
uint64_t charged(int dev);  // includes shard credit; see used_locked
bool in_arena(uintptr_t p);
char *shadow_of(uintptr_t p);
void shadow_discard(uintptr_t p, size_t n);
bool shadow_map_fd(uintptr_t p, size_t n, int fd, size_t offset);
void shadow_unmap(uintptr_t p, size_t n);

// ---- devices and contexts ----
struct Device {
    CUctx_st *primary = nullptr;
    int primary_refs = 0;
    CUmemPoolHandle_st *default_pool = nullptr;
    CUmemPoolHandle_st *current_pool = nullptr;
};
std::vector<Device> &devices_locked();
bool device_valid(CUdevice d);
bool context_live_locked(CUctx_st *c);
CUctx_st *current_context();
void set_current_context(CUctx_st *c);
// Live current context or CUDA_ERROR_INVALID_CONTEXT.
CUresult current_live(CUctx_st **out);
// Frees everything owned by c (allocations, streams, events) and marks it
// dead. Emits CONTEXT_DESTROY_STARTING first (without the lock held).
void destroy_context(CUctx_st *c);

// ---- allocations ----
enum class Kind { Device, Pool, Managed, Host, Graph };
struct Alloc {
    size_t size;      // requested bytes
    size_t charged;   // bytes counted against the device (0 for host)
    size_t span;      // bytes of address range owned (arena or mmap)
    int device;
    CUctx_st *ctx;
    Kind kind;
    CUmemPoolHandle_st *pool;
};
// Allocations made on the driver-mutex path (large device, pool, managed,
// host); small device allocations live in the shards instead.
std::map<uintptr_t, Alloc> &allocs_locked();
// The live allocation containing p (either store): its base and a copy of
// its record.
bool find_alloc_locked(uintptr_t p, uintptr_t *base, Alloc *out);
void release_alloc_locked(uintptr_t p);
// Host-side bytes behind [p, p+n) for copies: shadow for device memory, the
// pointer itself for host memory. INVALID_VALUE for dead device ranges.
CUresult resolve_locked(uintptr_t p, size_t n, char **out);

// Zeroed device memory for a module's global, freed by release_alloc_locked.
CUresult module_global_alloc_locked(CUctx_st *c, size_t n, uintptr_t *out);

// ---- modules (driver_module.cpp) ----
void modules_release_context_locked(CUctx_st *c);

// ---- registered host ranges (driver_host_register.cpp) ----
// The registration containing p: its base and size.
bool registered_find_locked(uintptr_t p, uintptr_t *base, size_t *size);
void registered_release_context_locked(CUctx_st *c);

// ---- small device allocations (small_blocks.cpp), no driver mutex ----
void small_init();  // after heap_init
// n <= kSmallMax bytes for live context c, charging round_up(n, kAlign).
// CUDA_ERROR_NOT_FOUND: no slab address range left (use the locked path).
CUresult small_alloc(CUctx_st *c, size_t n, uintptr_t *out);
// CUDA_ERROR_NOT_FOUND if p is in no slab (so not a small block); otherwise
// frees the block p starts, or INVALID_VALUE.
CUresult small_free(uintptr_t p);
bool small_find(uintptr_t p, uintptr_t *base, Alloc *out);
void small_release_context_locked(CUctx_st *c);
// Gives every empty slab's range back to the arena; the number given back.
size_t small_reclaim_locked();
// Takes every shard's credit for dev back into the device counter and stops
// shards taking more until the device has room again.
void small_drain_credit_locked(int dev);
// Bytes in use on dev: the counter minus shard credit, read consistently.
uint64_t used_locked(int dev);
// Every shard lock, in order (fork handlers, after driver_mutex).
void small_lock_all();
void small_unlock_all();

// ---- pools ----
CUmemPoolHandle_st *default_pool_locked(int dev);
CUresult pool_alloc_locked(CUmemPoolHandle_st *pool, size_t n, CUctx_st *ctx,
                           uintptr_t *out);
void pool_free_locked(uintptr_t p, const Alloc &a);
void pool_trim_locked(CUmemPoolHandle_st *pool, uint64_t keep);
// Synchronisation points are where pools give memory above their release
// threshold back to the device (the documented behaviour).
void pools_sync_locked(int dev);
bool pool_live_locked(CUmemPoolHandle_st *pool);

// ---- graphs (driver_graph.cpp) ----
// The graph `s` captures into, or nullptr (legacy and per-thread streams
// never capture here).
CUgraph_st *capture_graph_locked(CUstream s);
// cuMemAllocAsync / cuMemFreeAsync on a capturing stream: a memory node.
CUresult capture_alloc_locked(CUgraph_st *g, CUctx_st *c, size_t n, int dev, uintptr_t *out);
CUresult capture_free_locked(CUgraph_st *g, uintptr_t p);
// A graph allocation freed outside any graph (cuMemFree, cuMemFreeAsync,
// context teardown); its physical memory stays with the device's graph
// pool until cuDeviceGraphMemTrim.
void graph_release_locked(uintptr_t p, const Alloc &a);
void drop_context_graphs_locked(CUctx_st *c);

// ---- VMM ----
// The mapping containing [p, p+n), for copies and address-range queries.
bool vmm_find_mapping_locked(uintptr_t p, size_t n, uintptr_t *base, size_t *size);
// Whether every byte of [p, p+max(n,1)) is mapped, by one or several
// adjacent mappings (for copies and fills).
bool vmm_mapped_locked(uintptr_t p, size_t n);

// ---- streams and events ----
bool stream_valid_locked(CUstream s);
int stream_device_locked(CUstream s, int fallback);
void drop_context_streams_locked(CUctx_st *c);

// ---- callbacks ----
bool callbacks_active();
uint32_t next_correlation_id();
void emit_api(simcudaApiRecord *rec);
void emit_resource(uint32_t cbid, CUctx_st *ctx);

// Wraps a driver entry point: API_ENTER, the body, API_EXIT with its result.
template <class Params, class Body>
CUresult traced(uint32_t cbid, const char *name, const Params *params, Body &&body)
{
    if (!callbacks_active())
        return body();
    uint64_t correlation_data = 0;
    CUresult result = CUDA_SUCCESS;
    simcudaApiRecord rec{};
    rec.domain = CUPTI_CB_DOMAIN_DRIVER_API;
    rec.site = CUPTI_API_ENTER;
    rec.cbid = cbid;
    rec.name = name;
    rec.params = params;
    rec.returnValue = &result;
    rec.correlationData = &correlation_data;
    emit_api(&rec);
    result = body();
    rec.site = CUPTI_API_EXIT;
    emit_api(&rec);
    return result;
}

#define SIM_TRACED(fn, ...)                                                     \
    fn##_params sim_params_{__VA_ARGS__};                                       \
    return ::simcuda::traced(CUPTI_DRIVER_TRACE_CBID_##fn, #fn, &sim_params_,   \
                             [&]() -> CUresult

#define SIM_TRACED_END )

}  // namespace simcuda

// Prototypes of the per-thread-stream variants. The toolkit headers only
// declare them under CUDA_API_PER_THREAD_DEFAULT_STREAM, which would rename
// the default ones, so declare them here and check them against the default
// variant's type where they are defined.
#define SIM_SAME_TYPE(a, b) \
    static_assert(std::is_same_v<decltype(a), decltype(b)>, #a " prototype")

// Defines the per-thread-stream twin of an entry point; the behaviour is the
// same because every simulated stream is synchronous.
#define SIM_PT_TWIN(ret, twin, base, params, args) \
    ret CUDAAPI twin params;                       \
    ret CUDAAPI twin params { return base args; }  \
    SIM_SAME_TYPE(twin, base);
