// Device management: count, selection (thread-local), properties built from
// driver attributes (as the real runtime does), reset and synchronisation.
#include <cstring>

#include "runtime_internal.h"

using namespace simcudart;

namespace {

cudaError_t valid_device(int device)
{
    if (cudaError_t e = init())
        return e;
    int count = 0;
    drv().cuDeviceGetCount(&count);
    return device >= 0 && device < count ? cudaSuccess : cudaErrorInvalidDevice;
}

int attr(CUdevice_attribute a, int dev)
{
    int v = 0;
    drv().cuDeviceGetAttribute(&v, a, dev);
    return v;
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaGetDeviceCount(int *count)
{
    if (!count)
        return set_error(cudaErrorInvalidValue);
    *count = 0;
    if (cudaError_t e = init())
        return set_error(e);
    return ret(drv().cuDeviceGetCount(count));
}

cudaError_t CUDARTAPI cudaGetDevice(int *device)
{
    if (!device)
        return set_error(cudaErrorInvalidValue);
    if (cudaError_t e = init())
        return set_error(e);
    *device = current_device();
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device)
{
    if (cudaError_t e = valid_device(device))
        return set_error(e);
    set_current_device(device);
    // Since CUDA 12 cudaSetDevice initialises the device's primary context.
    return set_error(ensure_context(true));
}

cudaError_t CUDARTAPI cudaInitDevice(int device, unsigned int, unsigned int)
{
    return cudaSetDevice(device);
}

cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int) { return set_error(init()); }

cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int *flags)
{
    if (!flags)
        return set_error(cudaErrorInvalidValue);
    *flags = 0;
    return set_error(init());
}

cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr_, int device)
{
    if (!value)
        return set_error(cudaErrorInvalidValue);
    if (cudaError_t e = valid_device(device))
        return set_error(e);
    // cudaDeviceAttr and CUdevice_attribute share their numbering.
    return ret(drv().cuDeviceGetAttribute(value, static_cast<CUdevice_attribute>(attr_), device));
}

}  // extern "C"

namespace {

// Texture and surface limits, from the attributes named after them.
void fill_limits(cudaDeviceProp *p, int dev)
{
#define SIM_A(name) attr(CU_DEVICE_ATTRIBUTE_MAXIMUM_##name, dev)
    p->maxTexture1D = SIM_A(TEXTURE1D_WIDTH);
    p->maxTexture1DMipmap = SIM_A(TEXTURE1D_MIPMAPPED_WIDTH);
    p->maxTexture2D[0] = SIM_A(TEXTURE2D_WIDTH);
    p->maxTexture2D[1] = SIM_A(TEXTURE2D_HEIGHT);
    p->maxTexture2DMipmap[0] = SIM_A(TEXTURE2D_MIPMAPPED_WIDTH);
    p->maxTexture2DMipmap[1] = SIM_A(TEXTURE2D_MIPMAPPED_HEIGHT);
    p->maxTexture2DLinear[0] = SIM_A(TEXTURE2D_LINEAR_WIDTH);
    p->maxTexture2DLinear[1] = SIM_A(TEXTURE2D_LINEAR_HEIGHT);
    p->maxTexture2DLinear[2] = SIM_A(TEXTURE2D_LINEAR_PITCH);
    p->maxTexture2DGather[0] = SIM_A(TEXTURE2D_GATHER_WIDTH);
    p->maxTexture2DGather[1] = SIM_A(TEXTURE2D_GATHER_HEIGHT);
    p->maxTexture3D[0] = SIM_A(TEXTURE3D_WIDTH);
    p->maxTexture3D[1] = SIM_A(TEXTURE3D_HEIGHT);
    p->maxTexture3D[2] = SIM_A(TEXTURE3D_DEPTH);
    p->maxTexture3DAlt[0] = SIM_A(TEXTURE3D_WIDTH_ALTERNATE);
    p->maxTexture3DAlt[1] = SIM_A(TEXTURE3D_HEIGHT_ALTERNATE);
    p->maxTexture3DAlt[2] = SIM_A(TEXTURE3D_DEPTH_ALTERNATE);
    p->maxTextureCubemap = SIM_A(TEXTURECUBEMAP_WIDTH);
    p->maxTexture1DLayered[0] = SIM_A(TEXTURE1D_LAYERED_WIDTH);
    p->maxTexture1DLayered[1] = SIM_A(TEXTURE1D_LAYERED_LAYERS);
    p->maxTexture2DLayered[0] = SIM_A(TEXTURE2D_LAYERED_WIDTH);
    p->maxTexture2DLayered[1] = SIM_A(TEXTURE2D_LAYERED_HEIGHT);
    p->maxTexture2DLayered[2] = SIM_A(TEXTURE2D_LAYERED_LAYERS);
    p->maxTextureCubemapLayered[0] = SIM_A(TEXTURECUBEMAP_LAYERED_WIDTH);
    p->maxTextureCubemapLayered[1] = SIM_A(TEXTURECUBEMAP_LAYERED_LAYERS);
    p->maxSurface1D = SIM_A(SURFACE1D_WIDTH);
    p->maxSurface2D[0] = SIM_A(SURFACE2D_WIDTH);
    p->maxSurface2D[1] = SIM_A(SURFACE2D_HEIGHT);
    p->maxSurface3D[0] = SIM_A(SURFACE3D_WIDTH);
    p->maxSurface3D[1] = SIM_A(SURFACE3D_HEIGHT);
    p->maxSurface3D[2] = SIM_A(SURFACE3D_DEPTH);
    p->maxSurface1DLayered[0] = SIM_A(SURFACE1D_LAYERED_WIDTH);
    p->maxSurface1DLayered[1] = SIM_A(SURFACE1D_LAYERED_LAYERS);
    p->maxSurface2DLayered[0] = SIM_A(SURFACE2D_LAYERED_WIDTH);
    p->maxSurface2DLayered[1] = SIM_A(SURFACE2D_LAYERED_HEIGHT);
    p->maxSurface2DLayered[2] = SIM_A(SURFACE2D_LAYERED_LAYERS);
    p->maxSurfaceCubemap = SIM_A(SURFACECUBEMAP_WIDTH);
    p->maxSurfaceCubemapLayered[0] = SIM_A(SURFACECUBEMAP_LAYERED_WIDTH);
    p->maxSurfaceCubemapLayered[1] = SIM_A(SURFACECUBEMAP_LAYERED_LAYERS);
#undef SIM_A
}

void fill_features(cudaDeviceProp *p, int dev)
{
#define SIM_A(name) attr(CU_DEVICE_ATTRIBUTE_##name, dev)
    p->tccDriver = SIM_A(TCC_DRIVER);
    p->pageableMemoryAccessUsesHostPageTables = SIM_A(PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
    p->directManagedMemAccessFromHost = SIM_A(DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
    p->sparseCudaArraySupported = SIM_A(SPARSE_CUDA_ARRAY_SUPPORTED);
    p->hostRegisterReadOnlySupported = SIM_A(READ_ONLY_HOST_REGISTER_SUPPORTED);
    p->timelineSemaphoreInteropSupported = SIM_A(TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
    p->gpuDirectRDMASupported = SIM_A(GPU_DIRECT_RDMA_SUPPORTED);
    p->gpuDirectRDMAFlushWritesOptions = unsigned(SIM_A(GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS));
    p->gpuDirectRDMAWritesOrdering = SIM_A(GPU_DIRECT_RDMA_WRITES_ORDERING);
    p->deferredMappingCudaArraySupported = SIM_A(DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
    p->unifiedFunctionPointers = SIM_A(UNIFIED_FUNCTION_POINTERS);
    p->deviceNumaConfig = SIM_A(NUMA_CONFIG);
    p->mpsEnabled = SIM_A(MPS_ENABLED);
    p->gpuPciDeviceID = unsigned(SIM_A(GPU_PCI_DEVICE_ID));
    p->gpuPciSubsystemID = unsigned(SIM_A(GPU_PCI_SUBSYSTEM_ID));
    p->hostNumaMultinodeIpcSupported = SIM_A(HOST_NUMA_MULTINODE_IPC_SUPPORTED);
#undef SIM_A
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaGetDeviceProperties(cudaDeviceProp *prop, int device)
{
    if (!prop)
        return set_error(cudaErrorInvalidValue);
    if (cudaError_t e = valid_device(device))
        return set_error(e);
    const Driver &d = drv();
    std::memset(prop, 0, sizeof *prop);
    d.cuDeviceGetName(prop->name, sizeof prop->name, device);
    CUuuid uuid;
    d.cuDeviceGetUuid(&uuid, device);
    std::memcpy(&prop->uuid, &uuid, sizeof uuid);
    d.cuDeviceTotalMem(&prop->totalGlobalMem, device);
    prop->sharedMemPerBlock = size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, device));
    prop->regsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, device);
    prop->warpSize = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, device);
    prop->memPitch = size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH, device));
    prop->maxThreadsPerBlock = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
    prop->maxThreadsDim[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, device);
    prop->maxThreadsDim[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, device);
    prop->maxThreadsDim[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, device);
    prop->maxGridSize[0] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, device);
    prop->maxGridSize[1] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, device);
    prop->maxGridSize[2] = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, device);
    prop->totalConstMem = size_t(attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, device));
    prop->major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    prop->minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    prop->textureAlignment = size_t(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, device));
    prop->texturePitchAlignment = size_t(attr(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, device));
    prop->multiProcessorCount = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    prop->integrated = attr(CU_DEVICE_ATTRIBUTE_INTEGRATED, device);
    prop->canMapHostMemory = attr(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device);
    prop->surfaceAlignment = size_t(attr(CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, device));
    prop->concurrentKernels = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, device);
    prop->ECCEnabled = attr(CU_DEVICE_ATTRIBUTE_ECC_ENABLED, device);
    prop->pciBusID = attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, device);
    prop->pciDeviceID = attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, device);
    prop->pciDomainID = attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, device);
    prop->asyncEngineCount = attr(CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, device);
    prop->unifiedAddressing = attr(CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, device);
    prop->memoryBusWidth = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, device);
    prop->l2CacheSize = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device);
    prop->persistingL2CacheMaxSize = attr(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, device);
    prop->maxThreadsPerMultiProcessor =
        attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device);
    prop->streamPrioritiesSupported = attr(CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, device);
    prop->globalL1CacheSupported = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, device);
    prop->localL1CacheSupported = attr(CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, device);
    prop->sharedMemPerMultiprocessor =
        size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, device));
    prop->regsPerMultiprocessor = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, device);
    prop->managedMemory = attr(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, device);
    prop->isMultiGpuBoard = attr(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, device);
    prop->multiGpuBoardGroupID = attr(CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, device);
    prop->hostNativeAtomicSupported = attr(CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, device);
    prop->pageableMemoryAccess = attr(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, device);
    prop->concurrentManagedAccess = attr(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, device);
    prop->computePreemptionSupported =
        attr(CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, device);
    prop->canUseHostPointerForRegisteredMem =
        attr(CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, device);
    prop->cooperativeLaunch = attr(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, device);
    prop->sharedMemPerBlockOptin =
        size_t(attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device));
    prop->maxBlocksPerMultiProcessor = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, device);
    prop->accessPolicyMaxWindowSize = attr(CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, device);
    prop->reservedSharedMemPerBlock =
        size_t(attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, device));
    prop->hostRegisterSupported = attr(CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, device);
    prop->memoryPoolsSupported = attr(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device);
    prop->memoryPoolSupportedHandleTypes =
        unsigned(attr(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, device));
    prop->clusterLaunch = attr(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, device);
    prop->ipcEventSupported = attr(CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED, device);
    prop->deviceNumaId = attr(CU_DEVICE_ATTRIBUTE_NUMA_ID, device);
    prop->hostNumaId = attr(CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, device);
    fill_limits(prop, device);
    fill_features(prop, device);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char *pciBusId, int len, int device)
{
    if (cudaError_t e = valid_device(device))
        return set_error(e);
    return ret(drv().cuDeviceGetPCIBusId(pciBusId, len, device));
}

cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int *canAccessPeer, int device, int peerDevice)
{
    if (!canAccessPeer)
        return set_error(cudaErrorInvalidValue);
    if (cudaError_t e = valid_device(device))
        return set_error(e);
    if (cudaError_t e = valid_device(peerDevice))
        return set_error(e);
    *canAccessPeer = 0;  // no peer access between simulated devices
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void)
{
    SIM_RT_INIT();
    return ret(drv().cuCtxSynchronize());
}

cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    if (cudaError_t e = init())
        return set_error(e);
    cudaError_t result = cudaSuccess;
    auto body = [&]() -> cudaError_t {
        int dev = current_device();
        CUresult r = drv().cuDevicePrimaryCtxReset(dev);
        forget_context(dev);
        return from_cu(r);
    };
    // cudaDeviceReset takes no parameters, so it has no params struct.
    result = traced(CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020, "cudaDeviceReset_v3020",
                    static_cast<const void *>(nullptr), body);
    return set_error(result);
}

cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free, size_t *total)
{
    SIM_RT_INIT();
    return ret(drv().cuMemGetInfo(free, total));
}

cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    SIM_RT_INIT();
    return ret(drv().cuCtxGetStreamPriorityRange(leastPriority, greatestPriority));
}

}  // extern "C"
