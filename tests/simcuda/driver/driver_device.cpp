// Device enumeration and properties: every device is an H100-like sm_90 part
// whose global memory is the simulated capacity.
#include <cstdio>
#include <cstring>

#include "driver_internal.h"

namespace simcuda {
namespace {

struct AttrValue {
    CUdevice_attribute attr;
    int value;
};

// Values of an H100 SXM5; attributes not listed read as 0 (unsupported).
constexpr AttrValue kAttrs[] = {
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},
    {CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512},
    {CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1},
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
    {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1},
    {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 0},
    {CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 1},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448},
    {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 32505856},
    {CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632},
    {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR},
    {CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_NUMA_ID, -1},
    {CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1},
};

}  // namespace

bool device_valid(CUdevice d) { return d >= 0 && d < config().devices; }

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    SIM_REQUIRE_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = config().devices;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_REQUIRE_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(name, size_t(len), "simcuda H100 (simulated)");
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = config().capacity;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pi || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    *pi = 0;
    for (const AttrValue &a : kAttrs)
        if (a.attr == attrib)
            *pi = a.value;
    if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
        *pi = 0x18 + dev;
    if (attrib == CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID)
        *pi = dev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    std::memset(uuid->bytes, 0, sizeof uuid->bytes);
    std::memcpy(uuid->bytes, "simcuda-dev", 11);
    uuid->bytes[15] = char(dev);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pciBusId || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    std::snprintf(pciBusId, size_t(len), "0000:%02x:00.0", 0x18 + dev);
    return CUDA_SUCCESS;
}

}  // extern "C"
