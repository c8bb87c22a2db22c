// Streams and events.
#include "runtime_internal.h"

using namespace simcudart;

extern "C" {

cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
                                                   int priority)
{
    SIM_RT_INIT();
    if (!pStream)
        return set_error(cudaErrorInvalidValue);
    return ret(drv().cuStreamCreateWithPriority(pStream, flags, priority));
}

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
    return cudaStreamCreateWithPriority(pStream, flags, 0);
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *pStream)
{
    return cudaStreamCreateWithPriority(pStream, cudaStreamDefault, 0);
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamDestroy(stream));
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamSynchronize(stream));
}

cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamSynchronize_ptsz(stream));
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamQuery(stream));
}

cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamQuery_ptsz(stream));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamWaitEvent(stream, event, flags));
}

cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event,
                                               unsigned int flags)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamWaitEvent_ptsz(stream, event, flags));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *pCaptureStatus)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamIsCapturing(stream, reinterpret_cast<CUstreamCaptureStatus *>(pCaptureStatus)));
}

cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream,
                                                 cudaStreamCaptureStatus *pCaptureStatus)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamIsCapturing_ptsz(
        stream, reinterpret_cast<CUstreamCaptureStatus *>(pCaptureStatus)));
}

cudaError_t CUDARTAPI cudaStreamGetPriority(cudaStream_t hStream, int *priority)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamGetPriority(hStream, priority));
}

cudaError_t CUDARTAPI cudaStreamGetFlags(cudaStream_t hStream, unsigned int *flags)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamGetFlags(hStream, flags));
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    SIM_RT_INIT();
    if (!event)
        return set_error(cudaErrorInvalidValue);
    return ret(drv().cuEventCreate(event, flags));
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event)
{
    SIM_RT_INIT();
    return ret(drv().cuEventDestroy(event));
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuEventRecord(event, stream));
}

cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuEventRecord_ptsz(event, stream));
}

cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                               unsigned int flags)
{
    SIM_RT_INIT();
    return ret(drv().cuEventRecordWithFlags(event, stream, flags));
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event)
{
    SIM_RT_INIT();
    return ret(drv().cuEventQuery(event));
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event)
{
    SIM_RT_INIT();
    return ret(drv().cuEventSynchronize(event));
}

cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    SIM_RT_INIT();
    return ret(drv().cuEventElapsedTime(ms, start, end));
}

cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t stream,
                                               cudaStreamCaptureStatus *captureStatus_out,
                                               unsigned long long *id_out, cudaGraph_t *graph_out,
                                               const cudaGraphNode_t **dependencies_out,
                                               const cudaGraphEdgeData **edgeData_out,
                                               size_t *numDependencies_out)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamGetCaptureInfo(
        stream, reinterpret_cast<CUstreamCaptureStatus *>(captureStatus_out),
        reinterpret_cast<cuuint64_t *>(id_out), graph_out,
        dependencies_out, reinterpret_cast<const CUgraphEdgeData **>(edgeData_out),
        numDependencies_out));
}

cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream,
                                                    cudaStreamCaptureStatus *captureStatus_out,
                                                    unsigned long long *id_out,
                                                    cudaGraph_t *graph_out,
                                                    const cudaGraphNode_t **dependencies_out,
                                                    const cudaGraphEdgeData **edgeData_out,
                                                    size_t *numDependencies_out)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamGetCaptureInfo_ptsz(
        stream, reinterpret_cast<CUstreamCaptureStatus *>(captureStatus_out),
        reinterpret_cast<cuuint64_t *>(id_out), graph_out,
        dependencies_out, reinterpret_cast<const CUgraphEdgeData **>(edgeData_out),
        numDependencies_out));
}

// Streams are synchronous, so host functions and callbacks run at once, on
// the calling thread, after checking the stream handle.
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    SIM_RT_INIT();
    if (!fn)
        return set_error(cudaErrorInvalidValue);
    if (CUresult r = drv().cuStreamQuery(stream))
        return ret(r);
    fn(userData);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    return cudaLaunchHostFunc(stream, fn, userData);
}

cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                            void *userData, unsigned int flags)
{
    SIM_RT_INIT();
    if (!callback || flags != 0)
        return set_error(cudaErrorInvalidValue);
    if (CUresult r = drv().cuStreamQuery(stream))
        return ret(r);
    callback(stream, cudaSuccess, userData);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamAddCallback_ptsz(cudaStream_t stream, cudaStreamCallback_t callback,
                                                 void *userData, unsigned int flags)
{
    return cudaStreamAddCallback(stream, callback, userData, flags);
}

}  // extern "C"
