// simcuda's libcupti.so.13: the callback API, with one subscriber like CUPTI
// 13.0, or with SIMCUDA_CUPTI_MULTI=1 the multi-subscriber mode of CUPTI 13.3
// (cuptiSubscribe_v2 with allowMultipleSubscribers, as NVIDIA documents it).
//
// Events come from simcuda's driver through its private sink
// (simcuda_hooks.h), looked up with dlsym on libcuda.so.1. Callbacks run
// synchronously on the thread making the CUDA call, to each subscriber in
// the order they subscribed.
#include <cupti.h>
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "../error_table.h"
#include "../simcuda_hooks.h"

struct CUpti_Subscriber_st {
    CUpti_CallbackFunc callback;
    void *userdata;
    std::atomic<bool> active;
    char name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN];
    std::atomic<uint8_t> enabled[CUPTI_CB_DOMAIN_SIZE][1024];
};

namespace {

constexpr uint32_t kMaxCbid = 1024;
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kMaxCbid && CUPTI_RUNTIME_TRACE_CBID_SIZE <= kMaxCbid &&
              CUPTI_CBID_RESOURCE_SIZE <= kMaxCbid);

// CUpti_SubscriberParams as documented from CUPTI 13.2 on; the 13.0 header
// this is built from lacks the last member.
struct SubscriberParamsMulti {
    CUpti_SubscriberParams base;
    uint8_t allowMultipleSubscribers;
};
constexpr size_t kParamsMultiSize = offsetof(SubscriberParamsMulti, allowMultipleSubscribers) + 1;
// The CUPTI version whose multi-subscriber mode SIMCUDA_CUPTI_MULTI=1 models.
constexpr uint32_t kMultiVersion = 130300;

bool env_is_1(const char *name)
{
    const char *v = std::getenv(name);
    return v && std::strcmp(v, "1") == 0;
}

bool multi_supported() { return env_is_1("SIMCUDA_CUPTI_MULTI"); }

constexpr int kMaxSubscribers = 8;

std::mutex g_mutex;
// Held across fork() so a child never inherits it locked.
[[maybe_unused]] const int g_atfork = pthread_atfork([] { g_mutex.lock(); }, [] { g_mutex.unlock(); },
                                                     [] { g_mutex.unlock(); });
// Subscriber objects are static: a callback already in flight on another
// thread may still read one after cuptiUnsubscribe.
CUpti_Subscriber_st g_subscribers[kMaxSubscribers];
int g_count = 0;       // active subscribers (under g_mutex)
bool g_multi = false;  // the first subscriber asked for multi-subscriber mode (under g_mutex)

bool enabled(const CUpti_Subscriber_st &s, int domain, uint32_t cbid)
{
    return s.active.load(std::memory_order_acquire) && domain > 0 && domain < CUPTI_CB_DOMAIN_SIZE &&
           cbid < kMaxCbid && s.enabled[domain][cbid].load(std::memory_order_relaxed);
}

void on_api(void *, const simcudaApiRecord *rec)
{
    for (CUpti_Subscriber_st &s : g_subscribers) {
        if (!enabled(s, rec->domain, rec->cbid))
            continue;
        CUpti_CallbackData data{};
        data.callbackSite = static_cast<CUpti_ApiCallbackSite>(rec->site);
        data.functionName = rec->name;
        data.functionParams = rec->params;
        data.functionReturnValue = const_cast<void *>(rec->returnValue);
        data.context = rec->context;
        data.contextUid = rec->contextUid;
        data.correlationData = rec->correlationData;
        data.correlationId = rec->correlationId;
        s.callback(s.userdata, static_cast<CUpti_CallbackDomain>(rec->domain), rec->cbid, &data);
    }
}

void on_resource(void *, uint32_t cbid, CUcontext ctx, uint32_t)
{
    for (CUpti_Subscriber_st &s : g_subscribers) {
        if (!enabled(s, CUPTI_CB_DOMAIN_RESOURCE, cbid))
            continue;
        CUpti_ResourceData data{};
        data.context = ctx;
        s.callback(s.userdata, CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
    }
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
    return s >= g_subscribers && s < g_subscribers + kMaxSubscribers &&
           s->active.load(std::memory_order_acquire);
}

// The slot holder's name, for CUpti_SubscriberParams::oldSubscriberName.
void tell_holder(CUpti_SubscriberParams *params)
{
    if (!params || !params->oldSubscriberName || params->oldSubscriberSize == 0)
        return;
    for (const CUpti_Subscriber_st &s : g_subscribers)
        if (s.active.load(std::memory_order_relaxed)) {
            std::strncpy(params->oldSubscriberName, s.name, params->oldSubscriberSize - 1);
            params->oldSubscriberName[params->oldSubscriberSize - 1] = '\0';
            return;
        }
}

// v2: cuptiSubscribe_v2 (params may be null). One subscriber, unless the
// first asked for multi-subscriber mode through v2 where it is supported;
// then later v2 subscribers asking for it too are added, and anything else
// (a V1 subscriber, or a different setting) is refused, as CUPTI documents.
CUptiResult subscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata,
                      bool v2, CUpti_SubscriberParams *params)
{
    if (!subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (v2 && params && params->structSize == 0)
        return CUPTI_ERROR_INVALID_PARAMETER;
    // Stands in for a profiler (Nsight, Kineto, ...) holding the only slot.
    if (env_is_1("SIMCUDA_CUPTI_BUSY"))
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    bool want_multi = v2 && params && multi_supported() && params->structSize >= kParamsMultiSize &&
                      reinterpret_cast<SubscriberParamsMulti *>(params)->allowMultipleSubscribers;
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_count > 0 && !(g_multi && want_multi)) {
        tell_holder(params);
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    CUpti_Subscriber_st *slot = nullptr;
    for (CUpti_Subscriber_st &s : g_subscribers)
        if (!s.active.load(std::memory_order_relaxed)) {
            slot = &s;
            break;
        }
    if (!slot)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    if (g_count == 0) {
        simcudaRegisterCallbackSink_t reg = sink_registrar();
        simcudaCallbackSink sink{SIMCUDA_HOOKS_VERSION, nullptr, on_api, on_resource};
        if (!reg || reg(&sink) != 0)
            return CUPTI_ERROR_NOT_INITIALIZED;
        g_multi = want_multi;
    }
    for (auto &domain : slot->enabled)
        for (auto &flag : domain)
            flag.store(0, std::memory_order_relaxed);
    slot->callback = callback;
    slot->userdata = userdata;
    const char *name = v2 && params && params->subscriberName ? params->subscriberName : "unnamed";
    std::strncpy(slot->name, name, sizeof(slot->name) - 1);
    slot->name[sizeof(slot->name) - 1] = '\0';
    slot->active.store(true, std::memory_order_release);
    ++g_count;
    *subscriber = slot;
    return CUPTI_SUCCESS;
}

// The last subscriber gone: the driver stops reporting (under g_mutex).
void drop_sink()
{
    g_multi = false;
    if (simcudaRegisterCallbackSink_t reg = sink_registrar())
        reg(nullptr);
}

}  // namespace

extern "C" {

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                    void *userdata)
{
    return subscribe(subscriber, callback, userdata, false, nullptr);
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                       void *userdata, CUpti_SubscriberParams *params)
{
    return subscribe(subscriber, callback, userdata, true, params);
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!valid_handle(subscriber))
        return CUPTI_ERROR_INVALID_PARAMETER;
    subscriber->active.store(false, std::memory_order_release);
    if (--g_count == 0)
        drop_sink();
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
    *version = multi_supported() ? kMultiVersion : CUPTI_API_VERSION;
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
    // With several subscribers CUPTI returns early: one tool must not tear
    // CUPTI down under the others.
    if (g_count > 1)
        return CUPTI_SUCCESS;
    for (CUpti_Subscriber_st &s : g_subscribers)
        s.active.store(false, std::memory_order_release);
    if (g_count == 1)
        drop_sink();
    g_count = 0;
    return CUPTI_SUCCESS;
}

}  // extern "C"
