// Hints about managed memory (cuMemPrefetchAsync, cuMemAdvise). Managed
// memory never migrates here, so after the documented argument checks they
// change nothing.
#include "driver_internal.h"

namespace simcuda {
namespace {

// [p, p+count) lies inside one managed allocation.
bool managed_range_locked(CUdeviceptr p, size_t count)
{
    uintptr_t base;
    Alloc a;
    return count && find_alloc_locked(p, &base, &a) && a.kind == Kind::Managed &&
           count <= base + a.size - p;
}

// A device with concurrent managed access (every simulated one) or the host.
CUresult check_location(const CUmemLocation &loc)
{
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return device_valid(loc.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return CUDA_SUCCESS;  // the id is ignored
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        return loc.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;  // one NUMA node
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUmemLocation legacy_location(CUdevice dev)
{
    CUmemLocation loc{};
    loc.type = dev == CU_DEVICE_CPU ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    loc.id = dev;
    return loc;
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                       unsigned int flags, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = check_location(location))
        return r;
    Lock lock(driver_mutex());
    if (!managed_range_locked(devPtr, count))
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_valid_locked(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

SIM_PT_TWIN(CUresult, cuMemPrefetchAsync_v2_ptsz, cuMemPrefetchAsync_v2,
            (CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags,
             CUstream hStream),
            (devPtr, count, location, flags, hStream))

// The pre-13.0 variants name the destination by ordinal (CU_DEVICE_CPU: the host).
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                    CUstream hStream)
{
    return cuMemPrefetchAsync_v2(devPtr, count, legacy_location(dstDevice), 0, hStream);
}

SIM_PT_TWIN(CUresult, cuMemPrefetchAsync_ptsz, cuMemPrefetchAsync,
            (CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream),
            (devPtr, count, dstDevice, hStream))

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                                CUmemLocation location)
{
    SIM_REQUIRE_INIT();
    switch (advice) {
    case CU_MEM_ADVISE_SET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_READ_MOSTLY:
    case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION:
        break;  // the location is ignored
    case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
    case CU_MEM_ADVISE_SET_ACCESSED_BY:
    case CU_MEM_ADVISE_UNSET_ACCESSED_BY:
        if (CUresult r = check_location(location))
            return r;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    Lock lock(driver_mutex());
    return managed_range_locked(devPtr, count) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice,
                             CUdevice device)
{
    return cuMemAdvise_v2(devPtr, count, advice, legacy_location(device));
}

}  // extern "C"
