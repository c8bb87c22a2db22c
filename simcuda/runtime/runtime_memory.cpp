// Device, managed and pinned host allocations, copies, fills and pointer
// attributes: each is a thin mapping onto the driver call the real runtime
// makes.
#include <cstring>

#include "runtime_internal.h"

using namespace simcudart;

namespace {

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

bool valid_kind(cudaMemcpyKind kind) { return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault; }

CUdeviceptr dp(const void *p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMalloc, _v3020, devPtr, size) {
        if (!devPtr)
            return set_error(cudaErrorInvalidValue);
        if (size == 0) {  // a successful no-op, as documented
            *devPtr = nullptr;
            return cudaSuccess;
        }
        CUdeviceptr p = 0;
        CUresult r = drv().cuMemAlloc(&p, size);
        if (r == CUDA_SUCCESS)
            *devPtr = reinterpret_cast<void *>(p);
        return ret(r);
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocPitch, _v3020, devPtr, pitch, width, height) {
        if (!devPtr || !pitch)
            return set_error(cudaErrorInvalidValue);
        if (width == 0 || height == 0) {
            *devPtr = nullptr;
            *pitch = 0;
            return cudaSuccess;
        }
        CUdeviceptr p = 0;
        CUresult r = drv().cuMemAllocPitch(&p, pitch, width, height, 4);
        if (r == CUDA_SUCCESS)
            *devPtr = reinterpret_cast<void *>(p);
        return ret(r);
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMalloc3D(cudaPitchedPtr *pitchedDevPtr, cudaExtent extent)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMalloc3D, _v3020, pitchedDevPtr, extent) {
        if (!pitchedDevPtr)
            return set_error(cudaErrorInvalidValue);
        size_t pitch = round_up(extent.width, 512);
        *pitchedDevPtr = cudaPitchedPtr{nullptr, pitch, extent.width, extent.height};
        if (extent.width == 0 || extent.height == 0 || extent.depth == 0)
            return cudaSuccess;
        if (extent.height > SIZE_MAX / pitch / extent.depth)
            return set_error(cudaErrorMemoryAllocation);
        CUdeviceptr p = 0;
        CUresult r = drv().cuMemAlloc(&p, pitch * extent.height * extent.depth);
        if (r == CUDA_SUCCESS)
            pitchedDevPtr->ptr = reinterpret_cast<void *>(p);
        return ret(r);
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    // cudaFree(0) is the conventional way to initialise the runtime.
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaFree, _v3020, devPtr) {
        if (!devPtr)
            return cudaSuccess;
        return ret(drv().cuMemFree(dp(devPtr)));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocManaged, _v6000, devPtr, size, flags) {
        if (!devPtr || size == 0)
            return set_error(cudaErrorInvalidValue);
        CUdeviceptr p = 0;
        CUresult r = drv().cuMemAllocManaged(&p, size, flags);
        if (r == CUDA_SUCCESS)
            *devPtr = reinterpret_cast<void *>(p);
        return ret(r);
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaMallocHost, _v3020, ptr, size) {
        if (!ptr)
            return set_error(cudaErrorInvalidValue);
        if (size == 0) {
            *ptr = nullptr;
            return cudaSuccess;
        }
        return ret(drv().cuMemAllocHost(ptr, size));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaHostAlloc, _v3020, pHost, size, flags) {
        if (!pHost)
            return set_error(cudaErrorInvalidValue);
        if (size == 0) {
            *pHost = nullptr;
            return cudaSuccess;
        }
        // cudaHostAlloc* flags have the values of CU_MEMHOSTALLOC_*.
        return ret(drv().cuMemHostAlloc(pHost, size, flags));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaFreeHost, _v3020, ptr) {
        if (!ptr)
            return cudaSuccess;
        return ret(drv().cuMemFreeHost(ptr));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    SIM_RT_INIT();
    if (!valid_kind(kind))
        return set_error(cudaErrorInvalidMemcpyDirection);
    return ret(drv().cuMemcpy(dp(dst), dp(src), count));
}

cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t count, cudaMemcpyKind kind)
{
    SIM_RT_INIT();
    if (!valid_kind(kind))
        return set_error(cudaErrorInvalidMemcpyDirection);
    return ret(drv().cuMemcpy_ptds(dp(dst), dp(src), count));
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t count, cudaMemcpyKind kind,
                                      cudaStream_t stream)
{
    SIM_RT_INIT();
    if (!valid_kind(kind))
        return set_error(cudaErrorInvalidMemcpyDirection);
    return ret(drv().cuMemcpyAsync(dp(dst), dp(src), count, stream));
}

cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                           cudaMemcpyKind kind, cudaStream_t stream)
{
    SIM_RT_INIT();
    if (!valid_kind(kind))
        return set_error(cudaErrorInvalidMemcpyDirection);
    return ret(drv().cuMemcpyAsync_ptsz(dp(dst), dp(src), count, stream));
}

cudaError_t CUDARTAPI cudaMemset(void *devPtr, int value, size_t count)
{
    SIM_RT_INIT();
    return ret(drv().cuMemsetD8(dp(devPtr), static_cast<unsigned char>(value), count));
}

cudaError_t CUDARTAPI cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    SIM_RT_INIT();
    return ret(drv().cuMemsetD8_ptds(dp(devPtr), static_cast<unsigned char>(value), count));
}

cudaError_t CUDARTAPI cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuMemsetD8Async(dp(devPtr), static_cast<unsigned char>(value), count, stream));
}

cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count,
                                           cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuMemsetD8Async_ptsz(dp(devPtr), static_cast<unsigned char>(value), count,
                                          stream));
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes *attributes, const void *ptr)
{
    SIM_RT_INIT();
    if (!attributes)
        return set_error(cudaErrorInvalidValue);
    std::memset(attributes, 0, sizeof *attributes);
    const Driver &d = drv();
    unsigned type = 0;
    if (d.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dp(ptr)) != CUDA_SUCCESS) {
        // Memory CUDA does not know about is reported, not rejected.
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = cudaInvalidDeviceId;
        attributes->hostPointer = const_cast<void *>(ptr);
        return cudaSuccess;
    }
    int managed = 0, device = 0;
    d.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, dp(ptr));
    d.cuPointerGetAttribute(&device, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, dp(ptr));
    attributes->device = device;
    if (managed) {
        attributes->type = cudaMemoryTypeManaged;
        attributes->devicePointer = attributes->hostPointer = const_cast<void *>(ptr);
    } else if (type == CU_MEMORYTYPE_HOST) {
        attributes->type = cudaMemoryTypeHost;
        attributes->devicePointer = attributes->hostPointer = const_cast<void *>(ptr);
    } else {
        attributes->type = cudaMemoryTypeDevice;
        attributes->devicePointer = const_cast<void *>(ptr);
    }
    return cudaSuccess;
}

// Pitched copies row by row (unified addressing: the driver resolves both
// sides). torch uses cudaMemcpy2DAsync for some strided host<->device copies.
cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    SIM_RT_INIT();
    if (!valid_kind(kind))
        return set_error(cudaErrorInvalidMemcpyDirection);
    if (height > 0 && (width > dpitch || width > spitch))
        return set_error(cudaErrorInvalidPitchValue);
    for (size_t row = 0; row < height; ++row)
        if (CUresult r = drv().cuMemcpyAsync(dp(static_cast<char *>(dst) + row * dpitch),
                                             dp(static_cast<const char *>(src) + row * spitch),
                                             width, stream))
            return ret(r);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src,
                                             size_t spitch, size_t width, size_t height,
                                             cudaMemcpyKind kind, cudaStream_t stream)
{
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, stream);
}

cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, cudaMemcpyKind kind)
{
    cudaError_t e = cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, nullptr);
    return e;
}

}  // extern "C"
