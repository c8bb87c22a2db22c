// Virtual memory management. A physical allocation is a memfd (lazily
// committed) whose size counts against device capacity from cuMemCreate
// until its last reference goes: cuMemRelease drops the creation reference,
// but every mapping keeps its own, so memory released while mapped stays
// charged until it is unmapped (the documented semantics). Mapping a handle
// maps its memfd into the shadow, so two mappings of one handle alias.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "driver_internal.h"

namespace simcuda {
namespace {

struct Phys {
    size_t size;
    CUmemAllocationProp prop;
    int user_refs;  // cuMemCreate + cuMemRetainAllocationHandle
    int map_refs;   // live mappings
    int fd;
};

struct Mapping {
    size_t size;
    CUmemGenericAllocationHandle handle;
};

Immortal<std::map<CUmemGenericAllocationHandle, Phys>> g_handles;
Immortal<std::map<uintptr_t, size_t>> g_reservations;
Immortal<std::map<uintptr_t, Mapping>> g_mappings;
CUmemGenericAllocationHandle g_next_handle = 0x5100000001ull;

void unref_locked(CUmemGenericAllocationHandle h)
{
    auto it = g_handles->find(h);
    if (it->second.user_refs + it->second.map_refs > 0)
        return;
    close(it->second.fd);
    uncharge(it->second.prop.location.id, it->second.size);
    g_handles->erase(it);
}

bool in_reservation_locked(uintptr_t p, size_t n)
{
    auto it = g_reservations->upper_bound(p);
    if (it == g_reservations->begin())
        return false;
    --it;
    return p >= it->first && n <= it->first + it->second - p;
}

bool overlaps_mapping_locked(uintptr_t p, size_t n)
{
    auto it = g_mappings->lower_bound(p);
    if (it != g_mappings->end() && it->first < p + n)
        return true;
    if (it != g_mappings->begin()) {
        --it;
        if (it->first + it->second.size > p)
            return true;
    }
    return false;
}

}  // namespace

bool vmm_find_mapping_locked(uintptr_t p, size_t n, uintptr_t *base, size_t *size)
{
    auto it = g_mappings->upper_bound(p);
    if (it == g_mappings->begin())
        return false;
    --it;
    if (p >= it->first + it->second.size || n > it->first + it->second.size - p)
        return false;
    *base = it->first;
    *size = it->second.size;
    return true;
}

bool vmm_mapped_locked(uintptr_t p, size_t n)
{
    // Adjacent mappings form one range (an expandable segment is many
    // mappings in one reservation, and one memset or copy may cross them);
    // the shadow holds each at its address, so they are contiguous there too.
    n = std::max<size_t>(n, 1);
    if (n > UINTPTR_MAX - p)
        return false;
    uintptr_t end = p + n;
    while (p < end) {
        uintptr_t base;
        size_t len;
        if (!vmm_find_mapping_locked(p, 1, &base, &len))
            return false;
        p = base + len;
    }
    return true;
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                               CUmemAllocationGranularity_flags)
{
    SIM_REQUIRE_INIT();
    if (!granularity || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = kGranularity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                             const CUmemAllocationProp *prop, unsigned long long flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemCreate, handle, size, prop, flags) {
        if (!handle || !prop || flags != 0 || size == 0 || size % kGranularity ||
            prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
            prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (!device_valid(prop->location.id))
            return CUDA_ERROR_INVALID_DEVICE;
        // No NVLink fabric here; callers fall back to POSIX file descriptors.
        if (prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_FABRIC)
            return CUDA_ERROR_NOT_SUPPORTED;
        Lock lock(driver_mutex());
        if (size > config().capacity || !charge(prop->location.id, size))
            return CUDA_ERROR_OUT_OF_MEMORY;
        int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
        if (fd < 0 || ftruncate(fd, off_t(size)) != 0) {
            if (fd >= 0)
                close(fd);
            uncharge(prop->location.id, size);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        CUmemGenericAllocationHandle h = g_next_handle++;
        (*g_handles)[h] = Phys{size, *prop, 1, 0, fd};
        *handle = h;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemRelease, handle) {
        Lock lock(driver_mutex());
        auto it = g_handles->find(handle);
        if (it == g_handles->end() || it->second.user_refs == 0)
            return CUDA_ERROR_INVALID_VALUE;
        --it->second.user_refs;
        unref_locked(handle);
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                     CUdeviceptr addr, unsigned long long flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAddressReserve, ptr, size, alignment, addr, flags) {
        // The documented rules: size and hint are host-page multiples (not
        // granularity ones), alignment a power of two or 0, flags 0.
        const size_t page = size_t(sysconf(_SC_PAGESIZE));
        if (!ptr || size == 0 || size % page || addr % page || (alignment & (alignment - 1)) ||
            flags != 0)
            return CUDA_ERROR_INVALID_VALUE;
        Lock lock(driver_mutex());
        uintptr_t p;
        if (!va_carve(size, std::max(alignment, kGranularity), addr, &p))
            return CUDA_ERROR_OUT_OF_MEMORY;
        (*g_reservations)[p] = size;
        *ptr = p;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemAddressFree, ptr, size) {
        Lock lock(driver_mutex());
        auto it = g_reservations->find(ptr);
        if (it == g_reservations->end() || it->second != size || overlaps_mapping_locked(ptr, size))
            return CUDA_ERROR_INVALID_VALUE;
        g_reservations->erase(it);
        va_release(ptr, size);
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                          CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemMap, ptr, size, offset, handle, flags) {
        if (flags != 0 || size == 0 || size % kGranularity || offset % kGranularity ||
            ptr % kGranularity)
            return CUDA_ERROR_INVALID_VALUE;
        Lock lock(driver_mutex());
        auto it = g_handles->find(handle);
        if (it == g_handles->end() || offset > it->second.size || size > it->second.size - offset)
            return CUDA_ERROR_INVALID_VALUE;
        if (!in_reservation_locked(ptr, size) || overlaps_mapping_locked(ptr, size))
            return CUDA_ERROR_INVALID_VALUE;
        if (!shadow_map_fd(ptr, size, it->second.fd, offset))
            return CUDA_ERROR_OUT_OF_MEMORY;
        ++it->second.map_refs;
        (*g_mappings)[ptr] = Mapping{size, handle};
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemUnmap, ptr, size) {
        Lock lock(driver_mutex());
        // The range must be whole mappings without a hole between them (the
        // documented "entire contiguous address range that was mapped to").
        auto first = g_mappings->find(ptr);
        if (first == g_mappings->end() || size == 0 || size > UINTPTR_MAX - ptr)
            return CUDA_ERROR_INVALID_VALUE;
        uintptr_t at = ptr;
        auto last = first;
        for (; last != g_mappings->end() && last->first == at && at < ptr + size; ++last)
            at += last->second.size;
        if (at != ptr + size)
            return CUDA_ERROR_INVALID_VALUE;
        for (auto it = first; it != last;) {
            shadow_unmap(it->first, it->second.size);
            CUmemGenericAllocationHandle h = it->second.handle;
            it = g_mappings->erase(it);
            --(*g_handles)[h].map_refs;
            unref_locked(h);
        }
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                size_t count)
{
    SIM_REQUIRE_INIT();
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    return vmm_mapped_locked(ptr, size) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemRetainAllocationHandle, handle, addr) {
        if (!handle)
            return CUDA_ERROR_INVALID_VALUE;
        Lock lock(driver_mutex());
        auto it = g_mappings->upper_bound(reinterpret_cast<uintptr_t>(addr));
        if (it == g_mappings->begin())
            return CUDA_ERROR_INVALID_VALUE;
        --it;
        if (reinterpret_cast<uintptr_t>(addr) >= it->first + it->second.size)
            return CUDA_ERROR_INVALID_VALUE;
        ++(*g_handles)[it->second.handle].user_refs;
        *handle = it->second.handle;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                        CUmemGenericAllocationHandle handle)
{
    SIM_REQUIRE_INIT();
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    auto it = g_handles->find(handle);
    if (it == g_handles->end())
        return CUDA_ERROR_INVALID_VALUE;
    *prop = it->second.prop;
    return CUDA_SUCCESS;
}

}  // extern "C"
