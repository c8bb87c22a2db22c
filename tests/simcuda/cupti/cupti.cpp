// simcuda's libcupti.so.13: the callback API with one subscriber.
//
// Events come from simcuda's driver through its private sink
// (simcuda_hooks.h), looked up with dlsym on libcuda.so.1. Callbacks run
// synchronously on the thread making the CUDA call.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../error_table.h"
#include "../simcuda_hooks.h"

struct CUpti_Subscriber_st {
    CUpti_CallbackFunc callback;
    void *userdata;
    std::atomic<uint8_t> enabled[CUPTI_CB_DOMAIN_SIZE][1024];
};

namespace {

constexpr uint32_t kMaxCbid = 1024;
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kMaxCbid && CUPTI_RUNTIME_TRACE_CBID_SIZE <= kMaxCbid &&
              CUPTI_CBID_RESOURCE_SIZE <= kMaxCbid);

std::mutex g_mutex;
// Held across fork() so a child never inherits it locked.
[[maybe_unused]] const int g_atfork = pthread_atfork([] { g_mutex.lock(); }, [] { g_mutex.unlock(); },
                                                     [] { g_mutex.unlock(); });
// The subscriber object is static: a callback already in flight on another
// thread may still read it after cuptiUnsubscribe.
CUpti_Subscriber_st g_subscriber;
std::atomic<bool> g_subscribed{false};

bool enabled(int domain, uint32_t cbid)
{
    return g_subscribed.load(std::memory_order_acquire) && domain > 0 &&
           domain < CUPTI_CB_DOMAIN_SIZE && cbid < kMaxCbid &&
           g_subscriber.enabled[domain][cbid].load(std::memory_order_relaxed);
}

void on_api(void *, const simcudaApiRecord *rec)
{
    if (!enabled(rec->domain, rec->cbid))
        return;
    CUpti_CallbackData data{};
    data.callbackSite = static_cast<CUpti_ApiCallbackSite>(rec->site);
    data.functionName = rec->name;
    data.functionParams = rec->params;
    data.functionReturnValue = const_cast<void *>(rec->returnValue);
    data.context = rec->context;
    data.contextUid = rec->contextUid;
    data.correlationData = rec->correlationData;
    data.correlationId = rec->correlationId;
    g_subscriber.callback(g_subscriber.userdata, static_cast<CUpti_CallbackDomain>(rec->domain),
                          rec->cbid, &data);
}

void on_resource(void *, uint32_t cbid, CUcontext ctx, uint32_t)
{
    if (!enabled(CUPTI_CB_DOMAIN_RESOURCE, cbid))
        return;
    CUpti_ResourceData data{};
    data.context = ctx;
    g_subscriber.callback(g_subscriber.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
}

simcudaRegisterCallbackSink_t sink_registrar()
{
    static simcudaRegisterCallbackSink_t fn = [] {
        void *h = dlopen("libcuda.so.1", RTLD_NOW);
        return h ? reinterpret_cast<simcudaRegisterCallbackSink_t>(
                       dlsym(h, "simcudaInternalRegisterCallbackSink"))
                 : nullptr;
    }();
    return fn;
}

bool valid_domain(CUpti_CallbackDomain d) { return d > CUPTI_CB_DOMAIN_INVALID && d < CUPTI_CB_DOMAIN_SIZE; }

bool valid_handle(CUpti_SubscriberHandle s)
{
    return s == &g_subscriber && g_subscribed.load(std::memory_order_acquire);
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata)
{
    if (!subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    // Stands in for a profiler (Nsight, Kineto, ...) holding the only slot.
    if (const char *busy = std::getenv("SIMCUDA_CUPTI_BUSY"); busy && std::strcmp(busy, "1") == 0)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_subscribed.load())
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    simcudaRegisterCallbackSink_t reg = sink_registrar();
    if (!reg)
        return CUPTI_ERROR_NOT_INITIALIZED;
    for (auto &domain : g_subscriber.enabled)
        for (auto &flag : domain)
            flag.store(0, std::memory_order_relaxed);
    g_subscriber.callback = callback;
    g_subscriber.userdata = userdata;
    simcudaCallbackSink sink{SIMCUDA_HOOKS_VERSION, nullptr, on_api, on_resource};
    if (reg(&sink) != 0)
        return CUPTI_ERROR_NOT_INITIALIZED;
    g_subscribed.store(true, std::memory_order_release);
    *subscriber = &g_subscriber;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                       void *userdata, CUpti_SubscriberParams *)
{
    // allowMultipleSubscribers is not simulated: one subscriber, as before.
    return cuptiSubscribe(subscriber, callback, userdata);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!valid_handle(subscriber))
        return CUPTI_ERROR_INVALID_PARAMETER;
    g_subscribed.store(false, std::memory_order_release);
    if (simcudaRegisterCallbackSink_t reg = sink_registrar())
        reg(nullptr);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                         CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (!valid_handle(subscriber) || !valid_domain(domain) || cbid >= kMaxCbid)
        return CUPTI_ERROR_INVALID_PARAMETER;
    subscriber->enabled[domain][cbid].store(enable ? 1 : 0, std::memory_order_relaxed);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain)
{
    if (!valid_handle(subscriber) || !valid_domain(domain))
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (auto &flag : subscriber->enabled[domain])
        flag.store(enable ? 1 : 0, std::memory_order_relaxed);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber)
{
    if (!valid_handle(subscriber))
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (int d = CUPTI_CB_DOMAIN_INVALID + 1; d < CUPTI_CB_DOMAIN_SIZE; ++d)
        cuptiEnableDomain(enable, subscriber, static_cast<CUpti_CallbackDomain>(d));
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
                                           CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    if (!enable || !valid_handle(subscriber) || !valid_domain(domain) || cbid >= kMaxCbid)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *enable = subscriber->enabled[domain][cbid].load(std::memory_order_relaxed);
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const simcuda::ErrorEntry *row = simcuda::find_error(simcuda::kCuptiErrors, int(result));
    if (!row)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *str = row->name;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t *version)
{
    if (!version)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *version = CUPTI_API_VERSION;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
    if (!name)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const simcuda::ErrorEntry *table = nullptr;
    size_t prefix = 0;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid > 0 && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE) {
        table = simcuda::kDriverCbids;
        prefix = std::strlen("CUPTI_DRIVER_TRACE_CBID_");
    } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid > 0 &&
               cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE) {
        table = simcuda::kRuntimeCbids;
        prefix = std::strlen("CUPTI_RUNTIME_TRACE_CBID_");
    }
    const simcuda::ErrorEntry *row = table ? simcuda::find_error(table, int(cbid)) : nullptr;
    if (!row)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *name = row->name + prefix;
    return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiFinalize(void)
{
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_subscribed.exchange(false))
        if (simcudaRegisterCallbackSink_t reg = sink_registrar())
            reg(nullptr);
    return CUPTI_SUCCESS;
}

}  // extern "C"
