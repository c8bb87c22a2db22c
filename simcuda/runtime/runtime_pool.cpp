// Stream-ordered allocation and memory pools.
#include "runtime_internal.h"

using namespace simcudart;

namespace {

template <class Fn>
cudaError_t alloc_into(void **devPtr, Fn &&fn)
{
    if (!devPtr)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr p = 0;
    CUresult r = fn(&p);
    if (r == CUDA_SUCCESS)
        *devPtr = reinterpret_cast<void *>(p);
    return ret(r);
}

CUdeviceptr dp(const void *p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocAsync, _v11020, devPtr, size, hStream) {
        return alloc_into(devPtr, [&](CUdeviceptr *p) { return drv().cuMemAllocAsync(p, size, hStream); });
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t hStream)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocAsync_ptsz, _v11020, devPtr, size, hStream) {
        return alloc_into(devPtr,
                          [&](CUdeviceptr *p) { return drv().cuMemAllocAsync_ptsz(p, size, hStream); });
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                              cudaStream_t stream)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocFromPoolAsync, _v11020, ptr, size, memPool, stream) {
        return alloc_into(ptr, [&](CUdeviceptr *p) {
            return drv().cuMemAllocFromPoolAsync(p, size, memPool, stream);
        });
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size, cudaMemPool_t memPool,
                                                   cudaStream_t stream)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocFromPoolAsync_ptsz, _v11020, ptr, size, memPool, stream) {
        return alloc_into(ptr, [&](CUdeviceptr *p) {
            return drv().cuMemAllocFromPoolAsync_ptsz(p, size, memPool, stream);
        });
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaFreeAsync, _v11020, devPtr, hStream) {
        return ret(drv().cuMemFreeAsync(dp(devPtr), hStream));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaFreeAsync_ptsz(void *devPtr, cudaStream_t hStream)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaFreeAsync_ptsz, _v11020, devPtr, hStream) {
        return ret(drv().cuMemFreeAsync_ptsz(dp(devPtr), hStream));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    SIM_RT_INIT();
    return ret(drv().cuDeviceGetDefaultMemPool(memPool, device));
}

cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    SIM_RT_INIT();
    return ret(drv().cuDeviceGetMemPool(memPool, device));
}

cudaError_t CUDARTAPI cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    SIM_RT_INIT();
    return ret(drv().cuDeviceSetMemPool(device, memPool));
}

cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t *memPool, const cudaMemPoolProps *poolProps)
{
    SIM_RT_INIT();
    // cudaMemPoolProps and CUmemPoolProps have the same layout and values.
    static_assert(sizeof(cudaMemPoolProps) == sizeof(CUmemPoolProps));
    return ret(drv().cuMemPoolCreate(memPool, reinterpret_cast<const CUmemPoolProps *>(poolProps)));
}

cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    SIM_RT_INIT();
    return ret(drv().cuMemPoolDestroy(memPool));
}

cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void *value)
{
    SIM_RT_INIT();
    return ret(drv().cuMemPoolSetAttribute(memPool, static_cast<CUmemPool_attribute>(attr), value));
}

cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool, cudaMemPoolAttr attr, void *value)
{
    SIM_RT_INIT();
    return ret(drv().cuMemPoolGetAttribute(memPool, static_cast<CUmemPool_attribute>(attr), value));
}

cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    SIM_RT_INIT();
    return ret(drv().cuMemPoolTrimTo(memPool, minBytesToKeep));
}

}  // extern "C"
