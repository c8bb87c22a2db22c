// Driver loading, per-thread state (current device, last error), the
// primary-context binding, errors, versions and driver entry points.
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <vector>

#include "../error_table.h"
#include "runtime_internal.h"

namespace simcudart {
namespace {

constexpr int kMaxDevices = 64;

Driver g_drv;
cudaError_t g_init_result = cudaSuccess;
std::once_flag g_init_once;

thread_local cudaError_t t_last_error = cudaSuccess;
thread_local int t_device = 0;
thread_local CUcontext t_bound = nullptr;
thread_local unsigned t_bound_generation = 0;
thread_local int t_bound_device = -1;

std::mutex g_ctx_mutex;
CUcontext g_primary[kMaxDevices];
std::atomic<unsigned> g_generation[kMaxDevices];

cudaError_t load()
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    // g_ctx_mutex is held across fork() so a child never inherits it locked.
    // It is taken before the driver's lock (ensure_context retains the
    // primary context under it), and prepare handlers run in reverse order
    // of registration: registering after libcuda's own handler makes the
    // prepare order g_ctx_mutex, then the driver's.
    static const int atfork = pthread_atfork([] { g_ctx_mutex.lock(); },
                                             [] { g_ctx_mutex.unlock(); },
                                             [] { g_ctx_mutex.unlock(); });
    (void)atfork;
    if (!h)
        return cudaErrorInsufficientDriver;
    g_drv.getProcAddress =
        reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
    if (!g_drv.getProcAddress)
        return cudaErrorInsufficientDriver;
    bool ok = true;
    auto resolve = [&](const char *base, void **slot, bool per_thread) {
        CUdriverProcAddressQueryResult status;
        cuuint64_t flags = per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                      : CU_GET_PROC_ADDRESS_DEFAULT;
        if (g_drv.getProcAddress(base, slot, CUDART_VERSION, flags, &status) != CUDA_SUCCESS ||
            status != CU_GET_PROC_ADDRESS_SUCCESS || !*slot) {
            std::fprintf(stderr, "simcuda: libcudart: driver lacks %s\n", base);
            ok = false;
        }
    };
#define SIM_RESOLVE(field, base, pfn, pt) \
    resolve(#base, reinterpret_cast<void **>(&g_drv.field), pt);
    SIM_DRIVER_FUNCTIONS(SIM_RESOLVE)
#undef SIM_RESOLVE
    if (!ok)
        return cudaErrorInsufficientDriver;
    // Optional private hooks: with another libcuda they are simply absent.
    g_drv.callbacksActive =
        reinterpret_cast<simcudaCallbacksActive_t>(dlsym(h, "simcudaInternalCallbacksActive"));
    g_drv.emitApi = reinterpret_cast<simcudaEmitApi_t>(dlsym(h, "simcudaInternalEmitApi"));
    CUresult r = g_drv.cuInit(0);
    if (r != CUDA_SUCCESS)
        return r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : cudaErrorInitializationError;
    int count = 0;
    if (g_drv.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0)
        return cudaErrorNoDevice;
    return cudaSuccess;
}

}  // namespace

cudaError_t init()
{
    std::call_once(g_init_once, [] { g_init_result = load(); });
    return g_init_result;
}

const Driver &drv() { return g_drv; }

cudaError_t set_error(cudaError_t e)
{
    if (e != cudaSuccess)
        t_last_error = e;
    return e;
}

int current_device() { return t_device; }
void set_current_device(int dev) { t_device = dev; }

cudaError_t ensure_context(bool force)
{
    if (cudaError_t e = init())
        return e;
    int dev = t_device;
    unsigned gen = g_generation[dev].load(std::memory_order_acquire);
    CUcontext cur = nullptr;
    g_drv.cuCtxGetCurrent(&cur);
    if (!force && cur) {
        if (cur != t_bound)
            return cudaSuccess;
        if (t_bound_device == dev && t_bound_generation == gen)
            return cudaSuccess;
    }
    CUcontext ctx;
    {
        std::lock_guard<std::mutex> lock(g_ctx_mutex);
        if (!g_primary[dev]) {
            if (CUresult r = g_drv.cuDevicePrimaryCtxRetain(&g_primary[dev], dev))
                return from_cu(r);
        }
        ctx = g_primary[dev];
        gen = g_generation[dev].load(std::memory_order_acquire);
    }
    if (CUresult r = g_drv.cuCtxSetCurrent(ctx))
        return from_cu(r);
    t_bound = ctx;
    t_bound_device = dev;
    t_bound_generation = gen;
    return cudaSuccess;
}

void forget_context(int dev)
{
    std::lock_guard<std::mutex> lock(g_ctx_mutex);
    g_primary[dev] = nullptr;
    g_generation[dev].fetch_add(1, std::memory_order_release);
}

}  // namespace simcudart

using namespace simcudart;

namespace {

cudaError_t entry_point(const char *symbol, void **funcPtr, int version, unsigned long long flags,
                        cudaDriverEntryPointQueryResult *status)
{
    if (!symbol || !funcPtr)
        return set_error(cudaErrorInvalidValue);
    if (cudaError_t e = init())
        return set_error(e);
    cuuint64_t cu_flags = 0;
    if (flags & cudaEnableLegacyStream)
        cu_flags |= CU_GET_PROC_ADDRESS_LEGACY_STREAM;
    if (flags & cudaEnablePerThreadDefaultStream)
        cu_flags |= CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = drv().getProcAddress(symbol, funcPtr, version, cu_flags, &q);
    if (status)
        *status = static_cast<cudaDriverEntryPointQueryResult>(q);
    // A missing symbol is reported through the status only, so probing for
    // optional entry points leaves no pending error behind.
    if (r == CUDA_ERROR_NOT_FOUND)
        return cudaSuccess;
    return r == CUDA_SUCCESS ? cudaSuccess : set_error(from_cu(r));
}

const char *error_text(cudaError_t e, bool name)
{
    const simcuda::ErrorEntry *row = simcuda::find_error(simcuda::kRuntimeErrors, int(e));
    if (!row)
        return name ? "cudaErrorUnknown" : "unrecognized error code";
    return name ? row->name : row->text;
}

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaGetLastError(void)
{
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return t_last_error; }

const char *CUDARTAPI cudaGetErrorName(cudaError_t error) { return error_text(error, true); }

const char *CUDARTAPI cudaGetErrorString(cudaError_t error) { return error_text(error, false); }

cudaError_t CUDARTAPI cudaDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return set_error(cudaErrorInvalidValue);
    // Without a loadable driver the real runtime reports 0, not an error.
    if (init() == cudaErrorInsufficientDriver) {
        *driverVersion = 0;
        return cudaSuccess;
    }
    return ret(drv().cuDriverGetVersion(driverVersion));
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    if (!runtimeVersion)
        return set_error(cudaErrorInvalidValue);
    *runtimeVersion = CUDART_VERSION;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                              unsigned long long flags,
                                              cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr,
                                                   unsigned long long flags,
                                                   cudaDriverEntryPointQueryResult *driverStatus)
{
    if (!(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
        flags |= cudaEnablePerThreadDefaultStream;
    return entry_point(symbol, funcPtr, CUDART_VERSION, flags, driverStatus);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *symbol, void **funcPtr,
                                                       unsigned int cudaVersion,
                                                       unsigned long long flags,
                                                       cudaDriverEntryPointQueryResult *driverStatus)
{
    return entry_point(symbol, funcPtr, int(cudaVersion), flags, driverStatus);
}

cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult *driverStatus)
{
    if (!(flags & (cudaEnableLegacyStream | cudaEnablePerThreadDefaultStream)))
        flags |= cudaEnablePerThreadDefaultStream;
    return entry_point(symbol, funcPtr, int(cudaVersion), flags, driverStatus);
}

}  // extern "C"
