// Copies and fills. Every operation completes before it returns (streams are
// synchronous), moving real bytes through the device shadow.
#include <cstring>
#include <type_traits>

#include "driver_internal.h"

namespace simcuda {
namespace {

CUresult copy(uintptr_t dst, uintptr_t src, size_t n, CUstream stream = nullptr)
{
    if (n == 0)
        return CUDA_SUCCESS;
    Lock lock(driver_mutex());
    if (stream && !stream_valid_locked(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_graph_locked(stream))
        return CUDA_SUCCESS;  // captured: a node, which simcuda does not keep
    char *d, *s;
    if (CUresult r = resolve_locked(dst, n, &d))
        return r;
    if (CUresult r = resolve_locked(src, n, &s))
        return r;
    std::memmove(d, s, n);
    return CUDA_SUCCESS;
}

template <class T>
CUresult fill(uintptr_t dst, T value, size_t count, CUstream stream = nullptr)
{
    if (count == 0)
        return CUDA_SUCCESS;
    if (dst % sizeof(T))
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (stream && !stream_valid_locked(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_graph_locked(stream))
        return CUDA_SUCCESS;  // captured: a node, which simcuda does not keep
    char *d;
    if (count > SIZE_MAX / sizeof(T))
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = resolve_locked(dst, count * sizeof(T), &d))
        return r;
    if constexpr (sizeof(T) == 1) {
        std::memset(d, value, count);
    } else {
        T *t = reinterpret_cast<T *>(d);
        for (size_t i = 0; i < count; ++i)
            t[i] = value;
    }
    return CUDA_SUCCESS;
}

uintptr_t u(const void *p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace
}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_REQUIRE_INIT();
    return copy(dst, src, ByteCount);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return copy(dst, src, ByteCount, hStream);
}

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SIM_REQUIRE_INIT();
    return copy(dstDevice, u(srcHost), ByteCount);
}

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_REQUIRE_INIT();
    return copy(u(dstHost), srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_REQUIRE_INIT();
    return copy(dstDevice, srcDevice, ByteCount);
}

CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                      size_t ByteCount, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return copy(dstDevice, u(srcHost), ByteCount, hStream);
}

CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                      CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return copy(u(dstHost), srcDevice, ByteCount, hStream);
}

CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                      size_t ByteCount, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return copy(dstDevice, srcDevice, ByteCount, hStream);
}

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    SIM_REQUIRE_INIT();
    return fill<unsigned char>(dstDevice, uc, N);
}

CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    SIM_REQUIRE_INIT();
    return fill<unsigned short>(dstDevice, us, N);
}

CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    SIM_REQUIRE_INIT();
    return fill<unsigned int>(dstDevice, ui, N);
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return fill<unsigned char>(dstDevice, uc, N, hStream);
}

CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                  CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return fill<unsigned short>(dstDevice, us, N, hStream);
}

CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return fill<unsigned int>(dstDevice, ui, N, hStream);
}

SIM_PT_TWIN(CUresult, cuMemcpy_ptds, cuMemcpy, (CUdeviceptr a, CUdeviceptr b, size_t n), (a, b, n))
SIM_PT_TWIN(CUresult, cuMemcpyAsync_ptsz, cuMemcpyAsync,
            (CUdeviceptr a, CUdeviceptr b, size_t n, CUstream s), (a, b, n, s))
SIM_PT_TWIN(CUresult, cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2,
            (CUdeviceptr a, const void *b, size_t n), (a, b, n))
SIM_PT_TWIN(CUresult, cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2,
            (void *a, CUdeviceptr b, size_t n), (a, b, n))
SIM_PT_TWIN(CUresult, cuMemcpyDtoD_v2_ptds, cuMemcpyDtoD_v2,
            (CUdeviceptr a, CUdeviceptr b, size_t n), (a, b, n))
SIM_PT_TWIN(CUresult, cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2,
            (CUdeviceptr a, const void *b, size_t n, CUstream s), (a, b, n, s))
SIM_PT_TWIN(CUresult, cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2,
            (void *a, CUdeviceptr b, size_t n, CUstream s), (a, b, n, s))
SIM_PT_TWIN(CUresult, cuMemcpyDtoDAsync_v2_ptsz, cuMemcpyDtoDAsync_v2,
            (CUdeviceptr a, CUdeviceptr b, size_t n, CUstream s), (a, b, n, s))
SIM_PT_TWIN(CUresult, cuMemsetD8_v2_ptds, cuMemsetD8_v2,
            (CUdeviceptr a, unsigned char v, size_t n), (a, v, n))
SIM_PT_TWIN(CUresult, cuMemsetD16_v2_ptds, cuMemsetD16_v2,
            (CUdeviceptr a, unsigned short v, size_t n), (a, v, n))
SIM_PT_TWIN(CUresult, cuMemsetD32_v2_ptds, cuMemsetD32_v2,
            (CUdeviceptr a, unsigned int v, size_t n), (a, v, n))
SIM_PT_TWIN(CUresult, cuMemsetD8Async_ptsz, cuMemsetD8Async,
            (CUdeviceptr a, unsigned char v, size_t n, CUstream s), (a, v, n, s))
SIM_PT_TWIN(CUresult, cuMemsetD16Async_ptsz, cuMemsetD16Async,
            (CUdeviceptr a, unsigned short v, size_t n, CUstream s), (a, v, n, s))
SIM_PT_TWIN(CUresult, cuMemsetD32Async_ptsz, cuMemsetD32Async,
            (CUdeviceptr a, unsigned int v, size_t n, CUstream s), (a, v, n, s))

}  // extern "C"
