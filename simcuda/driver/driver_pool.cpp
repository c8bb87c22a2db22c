// Stream-ordered allocation and memory pools.
//
// Accounting model (what cuMemPoolGetAttribute reports exactly):
//   used     = sum of live allocations, each rounded up to 512 bytes;
//   reserved = sum of chunks the pool holds from the device, each allocation
//              taking its own chunk rounded up to 2 MiB (cached chunks are
//              reused best-fit).
// Freed chunks stay cached until a synchronisation (stream, event, context)
// trims the pool down to its release threshold, or cuMemPoolTrimTo.
#include <algorithm>

#include "driver_internal.h"

namespace simcuda {
namespace {

Immortal<std::set<CUmemPoolHandle_st *>> g_pools;
// Destroyed pools are never freed, like contexts: allocations still out point
// at them, and a stale handle must not alias a newer pool. Kept here so they
// stay owned.
Immortal<std::vector<CUmemPoolHandle_st *>> g_destroyed_pools;

CUmemPoolHandle_st *new_pool_locked(int dev, bool is_default)
{
    auto *p = new CUmemPoolHandle_st{};
    p->device = dev;
    p->is_default = is_default;
    p->reuse_follow_event = p->reuse_opportunistic = p->reuse_internal = 1;
    g_pools->insert(p);
    return p;
}

void release_chunk_locked(CUmemPoolHandle_st *pool, uintptr_t p, size_t size)
{
    shadow_discard(p, size);
    va_release(p, size);
    uncharge(pool->device, size);
    pool->reserved -= size;
}

CUmemPoolHandle_st *current_pool_locked(int dev)
{
    Device &d = devices_locked()[dev];
    return d.current_pool ? d.current_pool : default_pool_locked(dev);
}

CUresult alloc_async(CUdeviceptr *dptr, size_t n, CUmemoryPool pool, CUstream stream)
{
    if (!dptr || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    Lock lock(driver_mutex());
    if (!stream_valid_locked(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!pool)
        pool = current_pool_locked(stream_device_locked(stream, c->device));
    else if (!pool_live_locked(pool))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p;
    // Captured: an allocation node of the capture's graph, allocated at launch.
    if (CUgraph_st *g = capture_graph_locked(stream)) {
        if (CUresult r = capture_alloc_locked(g, c, n, pool->device, &p))
            return r;
        *dptr = p;
        return CUDA_SUCCESS;
    }
    if (CUresult r = pool_alloc_locked(pool, n, c, &p))
        return r;
    *dptr = p;
    return CUDA_SUCCESS;
}

CUresult free_async(CUdeviceptr dptr, CUstream stream)
{
    Lock lock(driver_mutex());
    if (!stream_valid_locked(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    if (CUgraph_st *g = capture_graph_locked(stream))
        return capture_free_locked(g, dptr);
    auto it = allocs_locked().find(dptr);
    if (it == allocs_locked().end() ||
        (it->second.kind != Kind::Pool && it->second.kind != Kind::Graph))
        return CUDA_ERROR_INVALID_VALUE;
    release_alloc_locked(dptr);
    return CUDA_SUCCESS;
}

}  // namespace

bool pool_live_locked(CUmemPoolHandle_st *pool) { return pool && g_pools->count(pool); }

CUmemPoolHandle_st *default_pool_locked(int dev)
{
    Device &d = devices_locked()[dev];
    if (!d.default_pool)
        d.default_pool = new_pool_locked(dev, true);
    return d.default_pool;
}

CUresult pool_alloc_locked(CUmemPoolHandle_st *pool, size_t n, CUctx_st *ctx, uintptr_t *out)
{
    if (n > config().capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t chunk = round_up(n, kGranularity);
    uintptr_t p = 0;
    size_t span = 0;
    auto it = pool->cached.lower_bound(chunk);
    if (it != pool->cached.end()) {
        span = it->first;
        p = it->second;
        pool->cached.erase(it);
    } else {
        // Before failing, the pool gives its unused chunks back to the device.
        if (!charge(pool->device, chunk)) {
            pool_trim_locked(pool, 0);
            if (!charge(pool->device, chunk))
                return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!va_carve(chunk, kGranularity, 0, &p)) {
            uncharge(pool->device, chunk);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        span = chunk;
        pool->reserved += chunk;
        pool->reserved_high = std::max(pool->reserved_high, pool->reserved);
    }
    pool->used += round_up(n, kAlign);
    pool->used_high = std::max(pool->used_high, pool->used);
    allocs_locked()[p] = Alloc{n, 0, span, pool->device, ctx, Kind::Pool, pool};
    *out = p;
    return CUDA_SUCCESS;
}

void pool_free_locked(uintptr_t p, const Alloc &a)
{
    CUmemPoolHandle_st *pool = a.pool;
    pool->used -= round_up(a.size, kAlign);
    pool->cached.emplace(a.span, p);
    if (!g_pools->count(pool))  // destroyed pool: nothing may be kept
        pool_trim_locked(pool, 0);
}

void pool_trim_locked(CUmemPoolHandle_st *pool, uint64_t keep)
{
    while (pool->reserved > keep && !pool->cached.empty()) {
        auto it = std::prev(pool->cached.end());
        release_chunk_locked(pool, it->second, it->first);
        pool->cached.erase(it);
    }
}

void pools_sync_locked(int dev)
{
    for (CUmemPoolHandle_st *pool : *g_pools)
        if (pool->device == dev && pool->reserved > pool->release_threshold)
            pool_trim_locked(pool, pool->release_threshold);
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    Lock lock(driver_mutex());
    *pool_out = default_pool_locked(dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    Lock lock(driver_mutex());
    *pool = current_pool_locked(dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    SIM_REQUIRE_INIT();
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    Lock lock(driver_mutex());
    if (!pool_live_locked(pool) || pool->device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    devices_locked()[dev].current_pool = pool;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    SIM_REQUIRE_INIT();
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (poolProps->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!device_valid(poolProps->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    Lock lock(driver_mutex());
    *pool = new_pool_locked(poolProps->location.id, false);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!pool_live_locked(pool) || pool->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    // Outstanding allocations stay valid; their chunks go back to the device
    // as they are freed (the object itself is kept for them).
    pool_trim_locked(pool, 0);
    g_pools->erase(pool);
    g_destroyed_pools->push_back(pool);
    for (Device &d : devices_locked())
        if (d.current_pool == pool)
            d.current_pool = nullptr;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!pool_live_locked(pool))
        return CUDA_ERROR_INVALID_VALUE;
    pool_trim_locked(pool, minBytesToKeep);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!pool_live_locked(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        pool->reuse_follow_event = *static_cast<int *>(value);
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        pool->reuse_opportunistic = *static_cast<int *>(value);
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        pool->reuse_internal = *static_cast<int *>(value);
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        pool->release_threshold = *static_cast<cuuint64_t *>(value);
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:  // only resetting is allowed
        if (*static_cast<cuuint64_t *>(value) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        pool->reserved_high = pool->reserved;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        if (*static_cast<cuuint64_t *>(value) != 0)
            return CUDA_ERROR_INVALID_VALUE;
        pool->used_high = pool->used;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!pool_live_locked(pool) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    auto u64 = [&](uint64_t v) {
        *static_cast<cuuint64_t *>(value) = v;
        return CUDA_SUCCESS;
    };
    auto i32 = [&](int v) {
        *static_cast<int *>(value) = v;
        return CUDA_SUCCESS;
    };
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES: return i32(pool->reuse_follow_event);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC: return i32(pool->reuse_opportunistic);
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: return i32(pool->reuse_internal);
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: return u64(pool->release_threshold);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: return u64(pool->reserved);
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: return u64(pool->reserved_high);
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: return u64(pool->used);
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: return u64(pool->used_high);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocAsync, dptr, bytesize, hStream) {
        return alloc_async(dptr, bytesize, nullptr, hStream);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocAsync_ptsz, dptr, bytesize, hStream) {
        return alloc_async(dptr, bytesize, nullptr, hStream);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuMemAllocAsync_ptsz, cuMemAllocAsync);

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                         CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocFromPoolAsync, dptr, bytesize, pool, hStream) {
        if (!pool)
            return CUDA_ERROR_INVALID_VALUE;
        return alloc_async(dptr, bytesize, pool, hStream);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                              CUmemoryPool pool, CUstream hStream);
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                              CUmemoryPool pool, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocFromPoolAsync_ptsz, dptr, bytesize, pool, hStream) {
        if (!pool)
            return CUDA_ERROR_INVALID_VALUE;
        return alloc_async(dptr, bytesize, pool, hStream);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync);

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemFreeAsync, dptr, hStream) {
        return free_async(dptr, hStream);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemFreeAsync_ptsz, dptr, hStream) {
        return free_async(dptr, hStream);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuMemFreeAsync_ptsz, cuMemFreeAsync);

}  // extern "C"
