// Contexts: per-device primary contexts (reference counted, reusable after
// reset) and explicitly created ones. Context objects are never freed, so a
// stale CUcontext reads as "destroyed" instead of touching freed memory.
#include <cupti_callbacks.h>

#include <vector>

#include "driver_internal.h"

namespace simcuda {
namespace {

thread_local CUctx_st *t_current = nullptr;
thread_local std::vector<CUctx_st *> t_stack;  // cuCtxPush/PopCurrent
std::atomic<uint32_t> g_next_uid{1};
Immortal<std::set<CUctx_st *>> g_contexts;  // every context ever created

}  // namespace

std::vector<Device> &devices_locked()
{
    static Immortal<std::vector<Device>> devs;
    return *devs;
}

bool context_live_locked(CUctx_st *c) { return c && g_contexts->count(c) && c->alive; }

CUctx_st *current_context() { return t_current; }
void set_current_context(CUctx_st *c) { t_current = c; }

CUresult current_live(CUctx_st **out)
{
    // No lock: contexts are never freed and alive is atomic, so the
    // allocation hot path does not serialise here.
    CUctx_st *c = t_current;
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!c->alive.load(std::memory_order_acquire))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

void destroy_context(CUctx_st *c)
{
    // Tools report leaks here, before anything is torn down.
    emit_resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, c);
    Lock lock(driver_mutex());
    // Dead before its allocations are visited: the small-allocation path
    // checks alive under a shard lock, so it cannot add a block to a shard
    // already swept (see small_alloc).
    c->alive.store(false, std::memory_order_release);
    modules_release_context_locked(c);
    std::vector<uintptr_t> owned;
    for (auto &[p, a] : allocs_locked())
        if (a.ctx == c)
            owned.push_back(p);
    for (uintptr_t p : owned)
        release_alloc_locked(p);
    small_release_context_locked(c);
    registered_release_context_locked(c);
    drop_context_streams_locked(c);
    drop_context_graphs_locked(c);
    stop_driver_thread(c->events);
    if (c->primary) {
        Device &d = devices_locked()[c->device];
        if (d.default_pool)
            pool_trim_locked(d.default_pool, 0);
    }
}

// A context that came alive gets its event-handler thread, started outside
// the driver lock (pthread_create may wait on the dynamic loader, which may
// be running a constructor that calls CUDA). A context destroyed, or revived
// with a thread of its own, in between keeps none.
static void start_events_thread(CUctx_st *c)
{
    DriverThread t = start_driver_thread("cuda-EvtHandlr");
    Lock lock(driver_mutex());
    if (c->alive.load(std::memory_order_relaxed) && c->events.wake_fd < 0)
        c->events = t;
    else
        stop_driver_thread(t);
}

static CUctx_st *new_context_locked(int dev, bool primary)
{
    auto *c = new CUctx_st{dev, g_next_uid.fetch_add(1), primary, true};
    g_contexts->insert(c);
    return c;
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    bool created = false;
    CUctx_st *c;
    {
        Lock lock(driver_mutex());
        Device &d = devices_locked()[dev];
        if (!d.primary) {
            d.primary = new_context_locked(dev, true);
            created = true;
        } else if (!d.primary->alive) {
            d.primary->alive = true;
            d.primary->uid = g_next_uid.fetch_add(1);
            created = true;
        }
        ++d.primary_refs;
        c = d.primary;
    }
    if (created) {
        start_events_thread(c);
        emit_resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, c);
    }
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuDevicePrimaryCtxRelease_v2, dev) {
        if (!device_valid(dev))
            return CUDA_ERROR_INVALID_DEVICE;
        CUctx_st *dying = nullptr;
        {
            Lock lock(driver_mutex());
            Device &d = devices_locked()[dev];
            if (!d.primary || d.primary_refs == 0)
                return CUDA_ERROR_INVALID_CONTEXT;
            if (--d.primary_refs == 0 && d.primary->alive)
                dying = d.primary;
        }
        if (dying)
            destroy_context(dying);
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuDevicePrimaryCtxReset_v2, dev) {
        if (!device_valid(dev))
            return CUDA_ERROR_INVALID_DEVICE;
        CUctx_st *dying = nullptr;
        {
            Lock lock(driver_mutex());
            Device &d = devices_locked()[dev];
            if (d.primary && d.primary->alive)
                dying = d.primary;
            d.primary_refs = 0;
        }
        if (dying)
            destroy_context(dying);
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_REQUIRE_INIT();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    Lock lock(driver_mutex());
    Device &d = devices_locked()[dev];
    *flags = 0;
    *active = d.primary && d.primary->alive ? 1 : 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int)
{
    SIM_REQUIRE_INIT();
    return device_valid(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *, unsigned int, CUdevice dev)
{
    SIM_REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUctx_st *c;
    {
        Lock lock(driver_mutex());
        c = new_context_locked(dev, false);
    }
    start_events_thread(c);
    emit_resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, c);
    t_current = c;  // a new context is made current, like the real driver
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuCtxDestroy_v2, ctx) {
        {
            Lock lock(driver_mutex());
            if (!context_live_locked(ctx) || ctx->primary)
                return CUDA_ERROR_INVALID_CONTEXT;
        }
        destroy_context(ctx);
        if (t_current == ctx)
            t_current = nullptr;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = t_current;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    if (ctx) {
        Lock lock(driver_mutex());
        if (!context_live_locked(ctx))
            return CUDA_ERROR_INVALID_CONTEXT;
    }
    t_current = ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    {
        Lock lock(driver_mutex());
        if (!context_live_locked(ctx))
            return CUDA_ERROR_INVALID_CONTEXT;
    }
    t_stack.push_back(t_current);
    t_current = ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_REQUIRE_INIT();
    if (!t_current)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx)
        *pctx = t_current;
    t_current = t_stack.empty() ? nullptr : t_stack.back();
    if (!t_stack.empty())
        t_stack.pop_back();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    SIM_REQUIRE_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    *device = c->device;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    SIM_REQUIRE_INIT();
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    Lock lock(driver_mutex());
    pools_sync_locked(c->device);
    return CUDA_SUCCESS;
}

// CUDA 13.0's explicit-context variants (cuda.h keeps the old signatures as
// the defaults; a caller that asks for them by name, or a tool that resolves
// the newest variant, gets these). ctx == NULL means the current context.
CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    if (!ctx)
        return cuCtxSynchronize();
    Lock lock(driver_mutex());
    if (!g_contexts->count(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx->alive)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    pools_sync_locked(ctx->device);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    SIM_REQUIRE_INIT();
    if (!ctx)
        return cuCtxGetDevice(device);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!g_contexts->count(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx->alive)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *device = ctx->device;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_REQUIRE_INIT();
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    (void)ctx;
    *version = 13000;
    return CUDA_SUCCESS;
}

}  // extern "C"
