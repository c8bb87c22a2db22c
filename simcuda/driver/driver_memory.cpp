// Linear device memory, managed memory and pinned host memory, plus the
// queries over them (address ranges, pointer attributes, free memory).
// Device allocations up to kSmallMax go to the sharded allocator
// (small_blocks.cpp) without the driver mutex; the rest live in g_allocs.
#include <sys/mman.h>

#include <algorithm>

#include "driver_internal.h"

namespace simcuda {
namespace {

Immortal<std::map<uintptr_t, Alloc>> g_allocs;

CUresult alloc_device_locked(CUctx_st *c, size_t n, uintptr_t *out)
{
    if (n > config().capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = round_up(n, kAlign);
    if (!charge(c->device, span))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!va_carve(span, kAlign, 0, out)) {
        uncharge(c->device, span);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    (*g_allocs)[*out] = Alloc{n, span, span, c->device, c, Kind::Device, nullptr};
    return CUDA_SUCCESS;
}

// Pinned and managed memory must be ordinary host memory: the host reads it.
CUresult alloc_host_locked(CUctx_st *c, size_t n, Kind kind, uintptr_t *out)
{
    if (n > config().capacity && kind == Kind::Managed)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = round_up(n, 4096);
    size_t charged_bytes = kind == Kind::Managed ? span : 0;
    if (charged_bytes && !charge(c->device, charged_bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        if (charged_bytes)
            uncharge(c->device, charged_bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = reinterpret_cast<uintptr_t>(p);
    (*g_allocs)[*out] = Alloc{n, charged_bytes, span, c->device, c, kind, nullptr};
    return CUDA_SUCCESS;
}

CUresult with_context(CUresult (*fn)(CUctx_st *, size_t, uintptr_t *), size_t n, uintptr_t *out)
{
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    Lock lock(driver_mutex());
    // Again under the lock: the context may have been destroyed since.
    if (!c->alive.load(std::memory_order_relaxed))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    return fn(c, n, out);
}

CUresult alloc_device(size_t n, uintptr_t *out)
{
    if (n <= kSmallMax) {
        CUctx_st *c;
        if (CUresult r = current_live(&c))
            return r;
        // NOT_FOUND: no address range for a new slab; an exact-size range
        // may still fit.
        if (CUresult r = small_alloc(c, n, out); r != CUDA_ERROR_NOT_FOUND)
            return r;
    }
    return with_context(alloc_device_locked, n, out);
}

CUresult free_checked(uintptr_t p, bool host)
{
    if (!host) {
        if (CUresult r = small_free(p); r != CUDA_ERROR_NOT_FOUND)
            return r;
    }
    Lock lock(driver_mutex());
    auto it = g_allocs->find(p);
    if (it == g_allocs->end() || (it->second.kind == Kind::Host) != host)
        return CUDA_ERROR_INVALID_VALUE;
    release_alloc_locked(p);
    return CUDA_SUCCESS;
}

}  // namespace

std::map<uintptr_t, Alloc> &allocs_locked() { return *g_allocs; }

// The shadow of a fresh arena range reads as zeros.
CUresult module_global_alloc_locked(CUctx_st *c, size_t n, uintptr_t *out)
{
    return alloc_device_locked(c, n, out);
}

bool find_alloc_locked(uintptr_t p, uintptr_t *base, Alloc *out)
{
    if (small_find(p, base, out))
        return true;
    auto it = g_allocs->upper_bound(p);
    if (it == g_allocs->begin())
        return false;
    --it;
    if (p >= it->first + std::max<size_t>(it->second.size, 1))
        return false;
    *base = it->first;
    *out = it->second;
    return true;
}

void release_alloc_locked(uintptr_t p)
{
    auto it = g_allocs->find(p);
    if (it == g_allocs->end())
        return;
    Alloc a = it->second;
    g_allocs->erase(it);
    switch (a.kind) {
    case Kind::Device:
        shadow_discard(p, a.span);
        va_release(p, a.span);
        uncharge(a.device, a.charged);
        break;
    case Kind::Pool:
        pool_free_locked(p, a);
        break;
    case Kind::Graph:
        graph_release_locked(p, a);
        break;
    case Kind::Managed:
    case Kind::Host:
        munmap(reinterpret_cast<void *>(p), a.span);
        if (a.charged)
            uncharge(a.device, a.charged);
        break;
    }
}

CUresult resolve_locked(uintptr_t p, size_t n, char **out)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (!in_arena(p)) {
        *out = reinterpret_cast<char *>(p);
        return CUDA_SUCCESS;
    }
    uintptr_t base;
    Alloc a;
    if (find_alloc_locked(p, &base, &a) ? n > base + a.size - p : !vmm_mapped_locked(p, n))
        return CUDA_ERROR_INVALID_VALUE;
    *out = shadow_of(p);
    return CUDA_SUCCESS;
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAlloc_v2, dptr, bytesize) {
        if (!dptr || bytesize == 0)
            return CUDA_ERROR_INVALID_VALUE;
        uintptr_t p;
        CUresult r = alloc_device(bytesize, &p);
        if (r == CUDA_SUCCESS)
            *dptr = p;
        return r;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                    size_t height, unsigned int elementSize)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocPitch_v2, dptr, pitch, width, height, elementSize) {
        if (!dptr || !pitch || width == 0 || height == 0 ||
            (elementSize != 4 && elementSize != 8 && elementSize != 16))
            return CUDA_ERROR_INVALID_VALUE;
        size_t p_bytes = round_up(width, kAlign);
        if (height > config().capacity / p_bytes)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uintptr_t p;
        CUresult r = alloc_device(p_bytes * height, &p);
        if (r == CUDA_SUCCESS) {
            *dptr = p;
            *pitch = p_bytes;
        }
        return r;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemFree_v2, dptr) {
        return free_checked(dptr, false);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocManaged, dptr, bytesize, flags) {
        if (!dptr || bytesize == 0 ||
            (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
            return CUDA_ERROR_INVALID_VALUE;
        uintptr_t p;
        CUresult r = with_context(
            [](CUctx_st *c, size_t n, uintptr_t *o) {
                return alloc_host_locked(c, n, Kind::Managed, o);
            },
            bytesize, &p);
        if (r == CUDA_SUCCESS)
            *dptr = p;
        return r;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemHostAlloc, pp, bytesize, Flags) {
        if (!pp || bytesize == 0 ||
            (Flags & ~unsigned(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                               CU_MEMHOSTALLOC_WRITECOMBINED)))
            return CUDA_ERROR_INVALID_VALUE;
        uintptr_t p;
        CUresult r = with_context(
            [](CUctx_st *c, size_t n, uintptr_t *o) {
                return alloc_host_locked(c, n, Kind::Host, o);
            },
            bytesize, &p);
        if (r == CUDA_SUCCESS)
            *pp = reinterpret_cast<void *>(p);
        return r;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAllocHost_v2, pp, bytesize) {
        if (!pp || bytesize == 0)
            return CUDA_ERROR_INVALID_VALUE;
        uintptr_t p;
        CUresult r = with_context(
            [](CUctx_st *c, size_t n, uintptr_t *o) {
                return alloc_host_locked(c, n, Kind::Host, o);
            },
            bytesize, &p);
        if (r == CUDA_SUCCESS)
            *pp = reinterpret_cast<void *>(p);
        return r;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemFreeHost, p) {
        return free_checked(reinterpret_cast<uintptr_t>(p), true);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    SIM_REQUIRE_INIT();
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    uintptr_t base;
    size_t size;
    Alloc a;
    // Pinned allocations and registered ranges are mapped (every simulated
    // device has CAN_MAP_HOST_MEMORY and unified addressing).
    if (!(find_alloc_locked(reinterpret_cast<uintptr_t>(p), &base, &a) && a.kind == Kind::Host) &&
        !registered_find_locked(reinterpret_cast<uintptr_t>(p), &base, &size))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    SIM_REQUIRE_INIT();
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    *total = config().capacity;
    Lock lock(driver_mutex());
    *free = config().capacity - used_locked(c->device);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    uintptr_t base;
    size_t size;
    Alloc a;
    if (find_alloc_locked(dptr, &base, &a) && a.kind != Kind::Host) {
        size = a.size;
    } else if (!vmm_find_mapping_locked(dptr, 1, &base, &size)) {
        return CUDA_ERROR_NOT_FOUND;
    }
    if (pbase)
        *pbase = base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_REQUIRE_INIT();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    uintptr_t base = 0;
    size_t size = 0;
    Alloc a{};
    if (find_alloc_locked(ptr, &base, &a)) {
        size = a.size;
    } else if (vmm_find_mapping_locked(ptr, 1, &base, &size)) {
        a.kind = Kind::Device;
        a.device = -1;
    } else if (registered_find_locked(ptr, &base, &size)) {
        a.kind = Kind::Host;
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *static_cast<CUcontext *>(data) = a.ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned *>(data) =
            a.kind == Kind::Host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *static_cast<CUdeviceptr *>(data) = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a.kind != Kind::Host && a.kind != Kind::Managed)
            return CUDA_ERROR_INVALID_VALUE;
        *static_cast<void **>(data) = reinterpret_cast<void *>(ptr);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *static_cast<int *>(data) = a.kind == Kind::Managed;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *static_cast<int *>(data) = a.ctx ? a.ctx->device : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *static_cast<CUdeviceptr *>(data) = base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *static_cast<size_t *>(data) = size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *static_cast<int *>(data) = 1;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *static_cast<CUmemoryPool *>(data) = a.pool;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

}  // extern "C"
