// Streams and events. Work completes when it is issued, so streams are
// always idle and events complete at record time; what remains observable is
// handle validity, flags, priorities and event timing.
#include <algorithm>

#include "driver_internal.h"

namespace simcuda {
namespace {

Immortal<std::set<CUstream_st *>> g_streams;
Immortal<std::set<CUevent_st *>> g_events;
constexpr int kLeastPriority = 0, kGreatestPriority = -5;

bool event_valid_locked(CUevent e) { return e && g_events->count(e); }

CUresult sync_stream(CUstream s)
{
    Lock lock(driver_mutex());
    if (!stream_valid_locked(s))
        return CUDA_ERROR_INVALID_HANDLE;
    CUctx_st *c = current_context();
    pools_sync_locked(stream_device_locked(s, c ? c->device : 0));
    return CUDA_SUCCESS;
}

}  // namespace

bool stream_valid_locked(CUstream s)
{
    return !s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || g_streams->count(s);
}

int stream_device_locked(CUstream s, int fallback)
{
    if (s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD && g_streams->count(s))
        return s->ctx->device;
    return fallback;
}

void drop_context_streams_locked(CUctx_st *c)
{
    for (auto it = g_streams->begin(); it != g_streams->end();) {
        if ((*it)->ctx == c) {
            delete *it;
            it = g_streams->erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    SIM_REQUIRE_INIT();
    if (!phStream || (flags & ~unsigned(CU_STREAM_NON_BLOCKING)))
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    // Out-of-range priorities are clamped, as documented.
    priority = std::min(kLeastPriority, std::max(kGreatestPriority, priority));
    Lock lock(driver_mutex());
    auto *s = new CUstream_st{c, flags, priority};
    g_streams->insert(s);
    *phStream = s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return cuStreamCreateWithPriority(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    auto it = g_streams->find(hStream);
    if (it == g_streams->end())
        return CUDA_ERROR_INVALID_HANDLE;
    delete *it;
    g_streams->erase(it);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    SIM_REQUIRE_INIT();
    return sync_stream(hStream);
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    return stream_valid_locked(hStream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!stream_valid_locked(hStream) || !event_valid_locked(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!priority)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_valid_locked(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    *priority = g_streams->count(hStream) ? hStream->priority : 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_valid_locked(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    *flags = g_streams->count(hStream) ? hStream->flags : 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_valid_locked(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    *captureStatus = capture_graph_locked(hStream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE
                                                   : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                         unsigned int)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!stream_valid_locked(stream))
        return CUDA_ERROR_INVALID_HANDLE;
    char *p;
    if (CUresult r = resolve_locked(addr, sizeof value, &p))
        return r;
    *reinterpret_cast<cuuint32_t *>(p) = value;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    SIM_REQUIRE_INIT();
    if (leastPriority)
        *leastPriority = kLeastPriority;
    if (greatestPriority)
        *greatestPriority = kGreatestPriority;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    SIM_REQUIRE_INIT();
    if (!phEvent || (Flags & ~unsigned(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                        CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    Lock lock(driver_mutex());
    auto *e = new CUevent_st{Flags, false, {}};
    g_events->insert(e);
    *phEvent = e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!event_valid_locked(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    g_events->erase(hEvent);
    delete hEvent;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!event_valid_locked(hEvent) || !stream_valid_locked(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    hEvent->recorded = true;
    hEvent->when = std::chrono::steady_clock::now();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int)
{
    return cuEventRecord(hEvent, hStream);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    return event_valid_locked(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!event_valid_locked(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    CUctx_st *c = current_context();
    pools_sync_locked(c ? c->device : 0);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    SIM_REQUIRE_INIT();
    Lock lock(driver_mutex());
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_valid_locked(hStart) || !event_valid_locked(hEnd))
        return CUDA_ERROR_INVALID_HANDLE;
    if ((hStart->flags | hEnd->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!hStart->recorded || !hEnd->recorded)
        return CUDA_ERROR_INVALID_HANDLE;
    *pMilliseconds = std::chrono::duration<float, std::milli>(hEnd->when - hStart->when).count();
    return CUDA_SUCCESS;
}

SIM_PT_TWIN(CUresult, cuStreamSynchronize_ptsz, cuStreamSynchronize, (CUstream s), (s))
SIM_PT_TWIN(CUresult, cuStreamQuery_ptsz, cuStreamQuery, (CUstream s), (s))
SIM_PT_TWIN(CUresult, cuStreamWaitEvent_ptsz, cuStreamWaitEvent,
            (CUstream s, CUevent e, unsigned int f), (s, e, f))
SIM_PT_TWIN(CUresult, cuStreamGetPriority_ptsz, cuStreamGetPriority, (CUstream s, int *p), (s, p))
SIM_PT_TWIN(CUresult, cuStreamGetFlags_ptsz, cuStreamGetFlags, (CUstream s, unsigned int *f),
            (s, f))
SIM_PT_TWIN(CUresult, cuStreamIsCapturing_ptsz, cuStreamIsCapturing,
            (CUstream s, CUstreamCaptureStatus *c), (s, c))
SIM_PT_TWIN(CUresult, cuStreamWriteValue32_v2_ptsz, cuStreamWriteValue32_v2,
            (CUstream s, CUdeviceptr a, cuuint32_t v, unsigned int f), (s, a, v, f))
SIM_PT_TWIN(CUresult, cuEventRecord_ptsz, cuEventRecord, (CUevent e, CUstream s), (e, s))
SIM_PT_TWIN(CUresult, cuEventRecordWithFlags_ptsz, cuEventRecordWithFlags,
            (CUevent e, CUstream s, unsigned int f), (e, s, f))

}  // extern "C"
