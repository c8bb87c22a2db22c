// CUPTI callbacks delivered by simcuda.
#include <cupti.h>  // brings the generated *_params structs
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

struct Seen {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId cbid;
    CUpti_ApiCallbackSite site;
    std::string name;
    uint32_t correlation;
    uint64_t data_at_exit;
    int result;
    size_t bytes;
    CUcontext ctx;
    bool alloc_alive_at_destroy;
};

std::vector<Seen> g_seen;
CUdeviceptr g_probe_ptr;

void CUPTIAPI callback(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    CHECK(user == &g_seen);
    Seen s{domain, cbid, CUPTI_API_ENTER, "", 0, 0, -1, 0, nullptr, false};
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
        auto *r = static_cast<const CUpti_ResourceData *>(cbdata);
        s.ctx = r->context;
        if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && g_probe_ptr) {
            CUdeviceptr base;
            size_t size;
            // Nothing is torn down yet when the tool hears about it.
            s.alloc_alive_at_destroy = cuMemGetAddressRange(&base, &size, g_probe_ptr) == CUDA_SUCCESS;
        }
        g_seen.push_back(s);
        return;
    }
    auto *d = static_cast<const CUpti_CallbackData *>(cbdata);
    s.site = d->callbackSite;
    s.name = d->functionName;
    s.correlation = d->correlationId;
    s.ctx = d->context;
    if (d->callbackSite == CUPTI_API_ENTER) {
        *d->correlationData = 0xfeed0000u + cbid;
    } else {
        s.data_at_exit = *d->correlationData;
        s.result = domain == CUPTI_CB_DOMAIN_DRIVER_API
                       ? int(*static_cast<CUresult *>(d->functionReturnValue))
                       : int(*static_cast<cudaError_t *>(d->functionReturnValue));
    }
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2)
        s.bytes = static_cast<const cuMemAlloc_v2_params *>(d->functionParams)->bytesize;
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020)
        s.bytes = static_cast<const cudaMalloc_v3020_params *>(d->functionParams)->size;
    g_seen.push_back(s);
}

}  // namespace

TEST_CASE("one subscriber receives driver, runtime and resource callbacks", "[cupti]")
{
    uint32_t version = 0;
    REQUIRE(cuptiGetVersion(&version) == CUPTI_SUCCESS);
    CHECK(version == CUPTI_API_VERSION);
    CUpti_SubscriberHandle sub;
    REQUIRE(cuptiSubscribe(&sub, callback, &g_seen) == CUPTI_SUCCESS);
    CUpti_SubscriberHandle second;
    CHECK(cuptiSubscribe(&second, callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    const char *text = nullptr;
    REQUIRE(cuptiGetResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &text) == CUPTI_SUCCESS);
    CHECK(std::string(text) == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED");
    const char *cbname = nullptr;
    REQUIRE(cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
                                 &cbname) == CUPTI_SUCCESS);
    CHECK(std::string(cbname) == "cuMemAlloc_v2");

    REQUIRE(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS);
    REQUIRE(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020) == CUPTI_SUCCESS);
    REQUIRE(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RESOURCE) == CUPTI_SUCCESS);

    void *p = nullptr;
    REQUIRE(cudaMalloc(&p, 12345) == cudaSuccess);
    // Runtime enter, driver enter, driver exit, runtime exit, nested.
    std::vector<Seen> api;
    for (const Seen &s : g_seen)
        if (s.domain != CUPTI_CB_DOMAIN_RESOURCE)
            api.push_back(s);
    REQUIRE(api.size() == 4);
    CHECK(api[0].domain == CUPTI_CB_DOMAIN_RUNTIME_API);
    CHECK(api[0].name == "cudaMalloc_v3020");
    CHECK(api[0].bytes == 12345);
    CHECK(api[1].name == "cuMemAlloc_v2");
    CHECK(api[1].bytes == 12345);
    CHECK(api[2].site == CUPTI_API_EXIT);
    CHECK(api[2].result == CUDA_SUCCESS);
    CHECK(api[2].correlation == api[1].correlation);
    CHECK(api[2].data_at_exit == 0xfeed0000u + CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2);
    CHECK(api[3].domain == CUPTI_CB_DOMAIN_RUNTIME_API);
    CHECK(api[3].site == CUPTI_API_EXIT);
    CHECK(api[3].correlation == api[0].correlation);
    CHECK(api[0].correlation != api[1].correlation);
    CHECK(api[1].ctx != nullptr);
    // The primary context was created by the runtime's first call.
    CHECK(g_seen.front().domain == CUPTI_CB_DOMAIN_RESOURCE);
    CHECK(g_seen.front().cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED);

    g_seen.clear();
    CUdeviceptr big;
    CHECK(cuMemAlloc(&big, kPiB) == CUDA_ERROR_OUT_OF_MEMORY);
    REQUIRE(g_seen.size() == 2);
    CHECK(g_seen[1].result == CUDA_ERROR_OUT_OF_MEMORY);

    // Teardown: DESTROY_STARTING arrives before anything is freed.
    g_seen.clear();
    CUcontext ctx;
    REQUIRE(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
    REQUIRE(cuMemAlloc(&g_probe_ptr, 4096) == CUDA_SUCCESS);
    REQUIRE(cuCtxDestroy(ctx) == CUDA_SUCCESS);
    bool created = false, destroying = false;
    for (const Seen &s : g_seen) {
        if (s.domain == CUPTI_CB_DOMAIN_RESOURCE && s.cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
            created = s.ctx == ctx;
        if (s.domain == CUPTI_CB_DOMAIN_RESOURCE &&
            s.cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
            destroying = s.ctx == ctx;
            CHECK(s.alloc_alive_at_destroy);
        }
    }
    CHECK(created);
    CHECK(destroying);
    g_probe_ptr = 0;

    REQUIRE(cuptiUnsubscribe(sub) == CUPTI_SUCCESS);
    g_seen.clear();
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    REQUIRE(cudaFree(p) == cudaSuccess);
    CHECK(g_seen.empty());
    REQUIRE(cuptiSubscribe(&second, callback, &g_seen) == CUPTI_SUCCESS);  // slot is free again
    REQUIRE(cuptiUnsubscribe(second) == CUPTI_SUCCESS);
}

TEST_CASE("SIMCUDA_CUPTI_BUSY=1 makes the first subscriber fail", "[.busy]")
{
    CUpti_SubscriberHandle sub;
    CHECK(cuptiSubscribe(&sub, callback, nullptr) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
}

namespace {

// CUpti_SubscriberParams with the member CUPTI 13.2+ headers add.
struct ParamsMulti {
    CUpti_SubscriberParams base;
    uint8_t allowMultipleSubscribers;
};

// Records each API callback into the subscriber's own vector (its user data).
void CUPTIAPI collect(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
    auto *d = static_cast<const CUpti_CallbackData *>(cbdata);
    static_cast<std::vector<Seen> *>(user)->push_back(
        Seen{domain, cbid, d->callbackSite, d->functionName, 0, 0, -1, 0, nullptr, false});
}

CUptiResult subscribe_v2(CUpti_SubscriberHandle *sub, std::vector<Seen> *seen, const char *name, bool multi,
                         char *holder = nullptr)
{
    ParamsMulti p{};
    p.base.structSize = offsetof(ParamsMulti, allowMultipleSubscribers) + 1;
    p.base.subscriberName = name;
    p.base.oldSubscriberName = holder;
    p.base.oldSubscriberSize = holder ? CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN : 0;
    p.allowMultipleSubscribers = multi ? 1 : 0;
    return cuptiSubscribe_v2(sub, collect, seen, &p.base);
}

}  // namespace

TEST_CASE("one subscriber: a second is refused, V1 or V2, and told the holder", "[cupti]")
{
    sim_primary_context();
    uint32_t version = 0;
    REQUIRE(cuptiGetVersion(&version) == CUPTI_SUCCESS);
    CHECK(version == CUPTI_API_VERSION);
    CUpti_SubscriberHandle first = nullptr, second = nullptr;
    REQUIRE(subscribe_v2(&first, &g_seen, "first", true) == CUPTI_SUCCESS);
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    CHECK(subscribe_v2(&second, &g_seen, "second", true, holder) ==
          CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(std::string(holder) == "first");
    CHECK(cuptiSubscribe(&second, collect, &g_seen) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    REQUIRE(cuptiUnsubscribe(first) == CUPTI_SUCCESS);
}

TEST_CASE("SIMCUDA_CUPTI_MULTI=1: V2 subscribers asking for it share CUPTI", "[.multi]")
{
    sim_primary_context();
    uint32_t version = 0;
    REQUIRE(cuptiGetVersion(&version) == CUPTI_SUCCESS);
    CHECK(version >= 130300);
    std::vector<Seen> a, b;
    CUpti_SubscriberHandle first = nullptr, second = nullptr, other = nullptr;
    REQUIRE(subscribe_v2(&first, &a, "first", true) == CUPTI_SUCCESS);
    REQUIRE(subscribe_v2(&second, &b, "second", true) == CUPTI_SUCCESS);
    // A V1 subscriber, or a V2 one asking otherwise, is refused next to them.
    char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
    CHECK(cuptiSubscribe(&other, collect, &a) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(subscribe_v2(&other, &a, "other", false, holder) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(std::string(holder) == "first");

    // Each gets what it enabled, with its own user data.
    REQUIRE(cuptiEnableCallback(1, first, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2) ==
            CUPTI_SUCCESS);
    REQUIRE(cuptiEnableCallback(1, second, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2) ==
            CUPTI_SUCCESS);
    CUdeviceptr p = 0;
    REQUIRE(cuMemAlloc(&p, kMiB) == CUDA_SUCCESS);
    REQUIRE(cuMemFree(p) == CUDA_SUCCESS);
    CHECK(a.size() == 2);  // enter and exit of cuMemAlloc_v2
    CHECK(b.size() == 2);  // enter and exit of cuMemFree_v2
    CHECK(cuptiFinalize() == CUPTI_SUCCESS);  // does nothing while two are subscribed
    REQUIRE(cuptiUnsubscribe(first) == CUPTI_SUCCESS);
    REQUIRE(cuptiUnsubscribe(second) == CUPTI_SUCCESS);
    // Nobody left: the mode is chosen again by the next first subscriber.
    REQUIRE(cuptiSubscribe(&other, collect, &a) == CUPTI_SUCCESS);
    REQUIRE(cuptiUnsubscribe(other) == CUPTI_SUCCESS);
}
