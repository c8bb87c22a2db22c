// Shared state of simcuda's runtime (libcudart.so.13 / libcudart_static.a).
//
// The runtime never calls a driver symbol directly: it dlopens libcuda.so.1,
// takes cuGetProcAddress_v2 with dlsym, and resolves every driver function
// below through it (base name, cudaVersion 13000, per-thread flag for the
// _ptsz/_ptds twins), exactly like NVIDIA's runtime. Tools that hook
// cuGetProcAddress therefore see every call this runtime makes.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <cupti_callbacks.h>
#include <cupti_runtime_cbid.h>
#include <generated_cuda_runtime_api_meta.h>

#include <type_traits>

#include "../simcuda_hooks.h"

// X(field, base name, PFN type, per-thread)
#define SIM_DRIVER_FUNCTIONS(X)                                                          \
    X(cuInit, cuInit, PFN_cuInit_v2000, 0)                                               \
    X(cuDriverGetVersion, cuDriverGetVersion, PFN_cuDriverGetVersion_v2020, 0)           \
    X(cuDeviceGet, cuDeviceGet, PFN_cuDeviceGet_v2000, 0)                                \
    X(cuDeviceGetCount, cuDeviceGetCount, PFN_cuDeviceGetCount_v2000, 0)                 \
    X(cuDeviceGetName, cuDeviceGetName, PFN_cuDeviceGetName_v2000, 0)                    \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000, 0)     \
    X(cuDeviceTotalMem, cuDeviceTotalMem, PFN_cuDeviceTotalMem_v3020, 0)                 \
    X(cuDeviceGetUuid, cuDeviceGetUuid, PFN_cuDeviceGetUuid_v11040, 0)                   \
    X(cuDeviceGetPCIBusId, cuDeviceGetPCIBusId, PFN_cuDeviceGetPCIBusId_v4010, 0)        \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000, 0) \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, PFN_cuDevicePrimaryCtxReset_v11000, 0) \
    X(cuCtxSetCurrent, cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000, 0)                    \
    X(cuCtxGetCurrent, cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000, 0)                    \
    X(cuCtxSynchronize, cuCtxSynchronize, PFN_cuCtxSynchronize_v2000, 0)                 \
    X(cuCtxGetStreamPriorityRange, cuCtxGetStreamPriorityRange,                          \
      PFN_cuCtxGetStreamPriorityRange_v5050, 0)                                          \
    X(cuMemAlloc, cuMemAlloc, PFN_cuMemAlloc_v3020, 0)                                   \
    X(cuMemAllocPitch, cuMemAllocPitch, PFN_cuMemAllocPitch_v3020, 0)                    \
    X(cuMemFree, cuMemFree, PFN_cuMemFree_v3020, 0)                                      \
    X(cuMemAllocManaged, cuMemAllocManaged, PFN_cuMemAllocManaged_v6000, 0)              \
    X(cuMemAllocHost, cuMemAllocHost, PFN_cuMemAllocHost_v3020, 0)                       \
    X(cuMemHostAlloc, cuMemHostAlloc, PFN_cuMemHostAlloc_v2020, 0)                       \
    X(cuMemFreeHost, cuMemFreeHost, PFN_cuMemFreeHost_v2000, 0)                          \
    X(cuMemGetInfo, cuMemGetInfo, PFN_cuMemGetInfo_v3020, 0)                             \
    X(cuMemHostRegister, cuMemHostRegister, PFN_cuMemHostRegister_v6050, 0)              \
    X(cuMemHostUnregister, cuMemHostUnregister, PFN_cuMemHostUnregister_v4000, 0)        \
    X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer,                              \
      PFN_cuMemHostGetDevicePointer_v3020, 0)                                            \
    X(cuMemPrefetchAsync, cuMemPrefetchAsync, PFN_cuMemPrefetchAsync_v12020, 0)          \
    X(cuMemPrefetchAsync_ptsz, cuMemPrefetchAsync, PFN_cuMemPrefetchAsync_v12020_ptsz, 1) \
    X(cuMemAdvise, cuMemAdvise, PFN_cuMemAdvise_v12020, 0)                               \
    X(cuMemcpy, cuMemcpy, PFN_cuMemcpy_v4000, 0)                                         \
    X(cuMemcpy_ptds, cuMemcpy, PFN_cuMemcpy_v7000_ptds, 1)                               \
    X(cuMemcpyAsync, cuMemcpyAsync, PFN_cuMemcpyAsync_v4000, 0)                          \
    X(cuMemcpyAsync_ptsz, cuMemcpyAsync, PFN_cuMemcpyAsync_v7000_ptsz, 1)                \
    X(cuMemsetD8, cuMemsetD8, PFN_cuMemsetD8_v3020, 0)                                   \
    X(cuMemsetD8_ptds, cuMemsetD8, PFN_cuMemsetD8_v7000_ptds, 1)                         \
    X(cuMemsetD8Async, cuMemsetD8Async, PFN_cuMemsetD8Async_v3020, 0)                    \
    X(cuMemsetD8Async_ptsz, cuMemsetD8Async, PFN_cuMemsetD8Async_v7000_ptsz, 1)          \
    X(cuMemAllocAsync, cuMemAllocAsync, PFN_cuMemAllocAsync_v11020, 0)                   \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, PFN_cuMemAllocAsync_v11020_ptsz, 1)         \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020, 0) \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync,                             \
      PFN_cuMemAllocFromPoolAsync_v11020_ptsz, 1)                                        \
    X(cuMemFreeAsync, cuMemFreeAsync, PFN_cuMemFreeAsync_v11020, 0)                      \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, PFN_cuMemFreeAsync_v11020_ptsz, 1)            \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool,                              \
      PFN_cuDeviceGetDefaultMemPool_v11020, 0)                                           \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool, PFN_cuDeviceGetMemPool_v11020, 0)          \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool, PFN_cuDeviceSetMemPool_v11020, 0)          \
    X(cuMemPoolCreate, cuMemPoolCreate, PFN_cuMemPoolCreate_v11020, 0)                   \
    X(cuMemPoolDestroy, cuMemPoolDestroy, PFN_cuMemPoolDestroy_v11020, 0)                \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, PFN_cuMemPoolSetAttribute_v11020, 0) \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, PFN_cuMemPoolGetAttribute_v11020, 0) \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, PFN_cuMemPoolTrimTo_v11020, 0)                   \
    X(cuStreamCreateWithPriority, cuStreamCreateWithPriority,                            \
      PFN_cuStreamCreateWithPriority_v5050, 0)                                           \
    X(cuStreamDestroy, cuStreamDestroy, PFN_cuStreamDestroy_v4000, 0)                    \
    X(cuStreamSynchronize, cuStreamSynchronize, PFN_cuStreamSynchronize_v2000, 0)        \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize, PFN_cuStreamSynchronize_v7000_ptsz, 1) \
    X(cuStreamQuery, cuStreamQuery, PFN_cuStreamQuery_v2000, 0)                          \
    X(cuStreamQuery_ptsz, cuStreamQuery, PFN_cuStreamQuery_v7000_ptsz, 1)                \
    X(cuStreamWaitEvent, cuStreamWaitEvent, PFN_cuStreamWaitEvent_v3020, 0)              \
    X(cuStreamWaitEvent_ptsz, cuStreamWaitEvent, PFN_cuStreamWaitEvent_v7000_ptsz, 1)    \
    X(cuStreamIsCapturing, cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000, 0)       \
    X(cuStreamIsCapturing_ptsz, cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000_ptsz, 1) \
    X(cuStreamGetPriority, cuStreamGetPriority, PFN_cuStreamGetPriority_v5050, 0)        \
    X(cuStreamGetCaptureInfo, cuStreamGetCaptureInfo, PFN_cuStreamGetCaptureInfo_v12030, 0) \
    X(cuStreamGetCaptureInfo_ptsz, cuStreamGetCaptureInfo,                               \
      PFN_cuStreamGetCaptureInfo_v12030_ptsz, 1)                                         \
    X(cuStreamBeginCapture, cuStreamBeginCapture, PFN_cuStreamBeginCapture_v10010, 0)    \
    X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture,                                   \
      PFN_cuStreamBeginCapture_v10010_ptsz, 1)                                           \
    X(cuStreamEndCapture, cuStreamEndCapture, PFN_cuStreamEndCapture_v10000, 0)          \
    X(cuStreamEndCapture_ptsz, cuStreamEndCapture, PFN_cuStreamEndCapture_v10000_ptsz, 1) \
    X(cuGraphCreate, cuGraphCreate, PFN_cuGraphCreate_v10000, 0)                         \
    X(cuGraphGetNodes, cuGraphGetNodes, PFN_cuGraphGetNodes_v10000, 0)                   \
    X(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, PFN_cuGraphAddMemAllocNode_v11040, 0) \
    X(cuGraphAddMemFreeNode, cuGraphAddMemFreeNode, PFN_cuGraphAddMemFreeNode_v11040, 0) \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags,                          \
      PFN_cuGraphInstantiateWithFlags_v11040, 0)                                         \
    X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams,                        \
      PFN_cuGraphInstantiateWithParams_v12000, 0)                                        \
    X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams,                   \
      PFN_cuGraphInstantiateWithParams_v12000_ptsz, 1)                                   \
    X(cuGraphLaunch, cuGraphLaunch, PFN_cuGraphLaunch_v10000, 0)                         \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, PFN_cuGraphLaunch_v10000_ptsz, 1)               \
    X(cuGraphExecDestroy, cuGraphExecDestroy, PFN_cuGraphExecDestroy_v10000, 0)          \
    X(cuGraphDestroy, cuGraphDestroy, PFN_cuGraphDestroy_v10000, 0)                      \
    X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, PFN_cuDeviceGraphMemTrim_v11040, 0)    \
    X(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute,                        \
      PFN_cuDeviceGetGraphMemAttribute_v11040, 0)                                        \
    X(cuDeviceSetGraphMemAttribute, cuDeviceSetGraphMemAttribute,                        \
      PFN_cuDeviceSetGraphMemAttribute_v11040, 0)                                        \
    X(cuStreamGetFlags, cuStreamGetFlags, PFN_cuStreamGetFlags_v5050, 0)                 \
    X(cuEventCreate, cuEventCreate, PFN_cuEventCreate_v2000, 0)                          \
    X(cuEventDestroy, cuEventDestroy, PFN_cuEventDestroy_v4000, 0)                       \
    X(cuEventRecord, cuEventRecord, PFN_cuEventRecord_v2000, 0)                          \
    X(cuEventRecord_ptsz, cuEventRecord, PFN_cuEventRecord_v7000_ptsz, 1)                \
    X(cuEventRecordWithFlags, cuEventRecordWithFlags, PFN_cuEventRecordWithFlags_v11010, 0) \
    X(cuEventQuery, cuEventQuery, PFN_cuEventQuery_v2000, 0)                             \
    X(cuEventSynchronize, cuEventSynchronize, PFN_cuEventSynchronize_v2000, 0)           \
    X(cuEventElapsedTime, cuEventElapsedTime, PFN_cuEventElapsedTime_v12080, 0)          \
    X(cuPointerGetAttribute, cuPointerGetAttribute, PFN_cuPointerGetAttribute_v4000, 0)  \
    X(cuGetErrorString, cuGetErrorString, PFN_cuGetErrorString_v6000, 0)

namespace simcudart {

struct Driver {
#define SIM_FIELD(field, base, pfn, pt) pfn field = nullptr;
    SIM_DRIVER_FUNCTIONS(SIM_FIELD)
#undef SIM_FIELD
    PFN_cuGetProcAddress_v12000 getProcAddress = nullptr;
    simcudaCallbacksActive_t callbacksActive = nullptr;
    simcudaEmitApi_t emitApi = nullptr;
};

// Loads and resolves the driver once; returns the (sticky) init result.
cudaError_t init();
const Driver &drv();

// Driver errors share their numeric codes with the runtime's for every code
// this simulation produces (e.g. 2 = out of memory, 400 = invalid handle).
inline cudaError_t from_cu(CUresult r) { return static_cast<cudaError_t>(r); }

// Records a failure as the thread's last error; successes leave it alone.
cudaError_t set_error(cudaError_t e);
inline cudaError_t ret(CUresult r) { return set_error(from_cu(r)); }

// init() plus a current context: one set through the driver API is honoured,
// otherwise the current device's primary context is made current. force
// rebinds the primary context (cudaSetDevice).
cudaError_t ensure_context(bool force = false);
int current_device();
void set_current_device(int dev);
// Forget the primary context of dev (after cudaDeviceReset).
void forget_context(int dev);

// API_ENTER / API_EXIT for a runtime call, delivered through the driver.
template <class Params, class Body>
cudaError_t traced(uint32_t cbid, const char *name, const Params *params, Body &&body)
{
    const Driver &d = drv();
    if (!d.callbacksActive || !d.emitApi || !d.callbacksActive())
        return body();
    uint64_t correlation_data = 0;
    cudaError_t result = cudaSuccess;
    simcudaApiRecord rec{};
    rec.domain = CUPTI_CB_DOMAIN_RUNTIME_API;
    rec.site = CUPTI_API_ENTER;
    rec.cbid = cbid;
    rec.name = name;
    rec.params = params;
    rec.returnValue = &result;
    rec.correlationData = &correlation_data;
    d.emitApi(&rec);
    result = body();
    rec.site = CUPTI_API_EXIT;
    d.emitApi(&rec);
    return result;
}

// SIM_RT_TRACED(cudaMalloc, _v3020, devPtr, size) { ... } SIM_RT_TRACED_END;
#define SIM_RT_TRACED(fn, ver, ...)                                                      \
    fn##ver##_params sim_params_{__VA_ARGS__};                                           \
    return ::simcudart::traced(CUPTI_RUNTIME_TRACE_CBID_##fn##ver, #fn #ver, &sim_params_, \
                               [&]() -> cudaError_t

#define SIM_RT_TRACED_END )

#define SIM_RT_INIT()                                   \
    do {                                                \
        if (cudaError_t e_ = ::simcudart::ensure_context()) \
            return ::simcudart::set_error(e_);          \
    } while (0)

#define SIM_SAME_TYPE(a, b) \
    static_assert(std::is_same_v<decltype(a), decltype(b)>, #a " prototype")

}  // namespace simcudart
