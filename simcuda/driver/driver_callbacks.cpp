// The private callback sink (simcuda_hooks.h) through which libcupti.so.13
// observes driver and runtime API calls and context lifetime.
#include "driver_internal.h"

namespace simcuda {
namespace {

// Replaced sinks are never freed: another thread may still be delivering
// through the previous one. Each registered sink keeps a link to the one
// registered before it, so none of them becomes unreachable (a leak).
struct RegisteredSink {
    simcudaCallbackSink sink;
    const RegisteredSink *older;
};
std::atomic<const simcudaCallbackSink *> g_sink{nullptr};
std::atomic<const RegisteredSink *> g_registered{nullptr};  // newest first
std::atomic<uint32_t> g_correlation{1};

}  // namespace

bool callbacks_active() { return g_sink.load(std::memory_order_acquire) != nullptr; }

uint32_t next_correlation_id() { return g_correlation.fetch_add(1, std::memory_order_relaxed); }

void emit_api(simcudaApiRecord *rec)
{
    const simcudaCallbackSink *sink = g_sink.load(std::memory_order_acquire);
    if (!sink || !sink->api)
        return;
    if (rec->site == CUPTI_API_ENTER) {
        if (!rec->correlationId)
            rec->correlationId = next_correlation_id();
        if (!rec->context)
            rec->context = current_context();
        rec->contextUid = rec->context ? rec->context->uid.load() : 0;
    }
    sink->api(sink->user, rec);
}

void emit_resource(uint32_t cbid, CUctx_st *ctx)
{
    const simcudaCallbackSink *sink = g_sink.load(std::memory_order_acquire);
    if (sink && sink->resource)
        sink->resource(sink->user, cbid, ctx, ctx ? ctx->uid.load() : 0);
}

}  // namespace simcuda

extern "C" {

__attribute__((visibility("default"))) int
simcudaInternalRegisterCallbackSink(const simcudaCallbackSink *sink)
{
    if (sink && sink->version != SIMCUDA_HOOKS_VERSION)
        return -1;
    const simcudaCallbackSink *copy = nullptr;
    if (sink) {
        auto *node = new simcuda::RegisteredSink{*sink, simcuda::g_registered.load()};
        while (!simcuda::g_registered.compare_exchange_weak(node->older, node)) {
        }
        copy = &node->sink;
    }
    simcuda::g_sink.store(copy, std::memory_order_release);
    return 0;
}

__attribute__((visibility("default"))) int simcudaInternalCallbacksActive(void)
{
    return simcuda::callbacks_active();
}

__attribute__((visibility("default"))) void simcudaInternalEmitApi(simcudaApiRecord *rec)
{
    if (rec)
        simcuda::emit_api(rec);
}

}  // extern "C"
