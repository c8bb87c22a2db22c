#include "cupti_backend/event_callbacks.h"

#include <cuda.h>

#include <atomic>

#include "common/util/fork_safe.h"
#include "cupti_backend/call_owner.h"
#include "cupti_backend/context_devices.h"
#include "cupti_backend/param_decode.h"
#include "shim/core/activation.h"
#include "shim/core/context_id.h"
#include "shim/core/driver_api.h"
#include "shim/core/record_call.h"
#include "shim/core/thread_heap.h"

namespace torchseal {
// The shim's lifecycle: the first event recorded in a process (a forked child
// in particular) starts that process's own history file. HookScope calls it
// for the hooks; CUPTI callbacks never construct a HookScope. Weak and hidden
// so this backend still links against a shim that lacks it.

}  // namespace torchseal

namespace torchseal::cupti {
namespace {

std::atomic<bool> g_delivery{false};

// ---- per-thread state (initial-exec TLS: no allocation on first touch) ----
#define TS_TLS thread_local __attribute__((tls_model("initial-exec")))

// Set while this thread is inside our callback: a driver call we make from
// here (cuCtxGetDevice when a whole domain is enabled) is not an event.
TS_TLS bool t_busy = false;

// The runtime calls in progress on this thread, outermost first. Driver
// callbacks nested in them are recorded under the outermost runtime name
// (the user-facing call), like the hooks' HookScope nesting.
constexpr int kRuntimeDepth = 8;
TS_TLS ApiId t_runtime[kRuntimeDepth];
TS_TLS int t_runtime_depth = 0;

// Free tokens between API_ENTER and API_EXIT of a free: the recorder removes
// the record at entry (before the driver can hand the address out again)
// and must put it back if the free fails. A token is 48 bytes, too big for
// CUpti_CallbackData::correlationData (64 bits), so it lives in this
// thread-local stack and correlationData carries its tagged index. Enter and
// exit of one call run on the same thread and nest properly.
constexpr int kFreeSlots = 8;
constexpr uint64_t kSlotTag = 0x7ea1'0000'0000'0000ULL;
constexpr uint64_t kSlotTagMask = 0xffff'0000'0000'0000ULL;
// Per thread, on the heap (shim/core/thread_heap.h), with their depth: a
// thread's exit frees both.
struct FreeSlots {
  FreeToken slot[kFreeSlots];
  int depth = 0;
};
using ThreadFrees = ThreadHeap<FreeSlots>;

struct BusyScope {
  BusyScope() { t_busy = true; }
  ~BusyScope() { t_busy = false; }
};

// Whether this process has told the lifecycle it recorded (reset in a
// forked child), so the hot path pays one relaxed load.
std::atomic<bool> g_noted{false};

void mark_recorded() {
  if (g_noted.load(std::memory_order_relaxed)) return;
  g_noted.store(true, std::memory_order_relaxed);
  note_first_record();
}

bool roles_match(Role runtime, Role driver) {
  switch (runtime) {
    case Role::Alloc:
      return driver == Role::Alloc;
    case Role::Free:
      return driver == Role::Free || driver == Role::Release;
    case Role::Teardown:
      return driver == Role::Teardown;
    default:
      return false;
  }
}

// The API an event is reported under: the enclosing runtime call when one
// of the same kind is in progress (cudaMalloc -> cuMemAlloc_v2 is one
// cudaMalloc event), else the driver call itself (static cudart, cuBLAS,
// direct driver users).
ApiId user_api(ApiId driver) {
  if (t_runtime_depth > 0) {
    ApiId rt = t_runtime[0];
    if (roles_match(api_info(rt).role, api_info(driver).role)) return rt;
  }
  return driver;
}

Family family_of(ApiId api, ApiId driver) {
  Family f = api_info(api).family;
  return f == Family::None ? api_info(driver).family : f;
}

CUresult return_value_of(const CUpti_CallbackData *cb) {
  return cb->functionReturnValue ? *static_cast<const CUresult *>(cb->functionReturnValue)
                                 : CUDA_SUCCESS;
}

// The driver call's arguments, reported under `api`.
bool decode(ApiId drv, ApiId api, const CUpti_CallbackData *cb, CallResult r, CallArgs &a) {
  a.api = api;
  a.family = family_of(api, drv);
  a.result = r;
  return decode_driver_params(drv, cb->functionParams, r == CallResult::Ok, a);
}

void on_alloc_exit(ApiId drv, const CUpti_CallbackData *cb, CUresult rc) {
  CallArgs a;
  if (!decode(drv, user_api(drv), cb, result_of(rc), a) || !records_alloc(a)) return;
  if (!ensure_active()) return;
  if (a.device < 0) a.device = device_of_context(cb->context);
  a.context = context_id_of(cb->context);
  // Before recording: a forked child's history file must exist for its first event.
  mark_recorded();
  record_alloc(a);
}

void on_free_enter(ApiId drv, const CUpti_CallbackData *cb) {
  if (cb->correlationData) *cb->correlationData = 0;
  CallArgs a;
  if (!decode(drv, user_api(drv), cb, CallResult::Ok, a) || !records_free(a)) return;
  if (!ensure_active()) return;
  mark_recorded();
  FreeToken tok = record_free(a);
  if (!tok.known || !cb->correlationData) return;
  FreeSlots *f = ThreadFrees::get_or_make();
  // Without a slot (all taken, or no memory) the free cannot be undone.
  if (!f || f->depth >= kFreeSlots) return;
  f->slot[f->depth] = tok;
  *cb->correlationData = kSlotTag | static_cast<uint64_t>(f->depth + 1);
  ++f->depth;
}

void on_free_exit(const CUpti_CallbackData *cb, CUresult rc) {
  if (!cb->correlationData) return;
  uint64_t v = *cb->correlationData;
  if ((v & kSlotTagMask) != kSlotTag) return;
  int idx = static_cast<int>(v & 0xffff) - 1;
  *cb->correlationData = 0;
  FreeSlots *f = ThreadFrees::get();
  if (!f || idx < 0 || idx >= f->depth) return;  // stale: the stack was unwound
  free_returned(f->slot[idx], result_of(rc));
  // Pops this slot and any a missing exit left above it.
  f->depth = idx;
}

void on_vmm_exit(ApiId drv, const CUpti_CallbackData *cb, CUresult rc) {
  if (rc != CUDA_SUCCESS) return;
  CallArgs a;
  if (!decode(drv, drv, cb, CallResult::Ok, a)) return;
  if (!ensure_active()) return;
  record_vmm_range(a);
}

// Graph calls: recorded on exit, with the outputs the driver filled in.
void on_graph_exit(ApiId drv, const CUpti_CallbackData *cb, CUresult rc) {
  CallArgs a;
  if (!decode(drv, drv, cb, result_of(rc), a)) return;
  if (!ensure_active()) return;
  if (drv == ApiId::cuGraphAddMemAllocNode && a.device < 0)
    a.device = device_of_context(cb->context);
  a.context = context_id_of(cb->context);
  mark_recorded();
  record_graph_call(a);
}

// The recorder's on_teardown moves what it finds out of the live table, so
// the same teardown seen again (cudaDeviceReset -> cuDevicePrimaryCtxReset ->
// CONTEXT_DESTROY_STARTING) finds nothing the second time: no double report.
void on_teardown_call(ApiId drv, const CUpti_CallbackData *cb, bool enter, CUresult rc) {
  CallArgs a;
  if (!decode(drv, user_api(drv), cb, result_of(rc), a)) return;
  if (tears_down(drv, enter ? CallSite::Enter : CallSite::Exit, a) && ensure_active())
    record_teardown(a);
}

void on_driver(ApiId drv, const CUpti_CallbackData *cb) {
  bool enter = cb->callbackSite == CUPTI_API_ENTER;
  CUresult rc = enter ? CUDA_SUCCESS : return_value_of(cb);
  switch (api_info(drv).role) {
    case Role::Alloc:
      if (!enter) on_alloc_exit(drv, cb, rc);
      return;
    case Role::Free:
    case Role::Release:
      if (enter)
        on_free_enter(drv, cb);
      else
        on_free_exit(cb, rc);
      return;
    case Role::Map:
    case Role::Unmap:
    case Role::Reserve:
    case Role::Unreserve:
      if (!enter) on_vmm_exit(drv, cb, rc);
      return;
    case Role::Teardown:
      on_teardown_call(drv, cb, enter, rc);
      return;
    case Role::Graph:
      if (!enter) on_graph_exit(drv, cb, rc);
      return;
    case Role::Retain:
      if (!enter && rc == CUDA_SUCCESS) {
        CallArgs a;
        if (decode(drv, drv, cb, CallResult::Ok, a) && ensure_active()) record_vmm_retain(a);
      }
      return;
  }
}

void on_runtime(ApiId api, const CUpti_CallbackData *cb) {
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (t_runtime_depth < kRuntimeDepth) t_runtime[t_runtime_depth] = api;
    ++t_runtime_depth;
    // cudaDeviceReset: everything on the device dies; report it before the
    // runtime reaches the driver. The nested cuDevicePrimaryCtxReset_v2
    // covers it when the device is not known here.
    if (api_info(api).role == Role::Teardown && t_runtime_depth == 1) {
      int dev = current_device();
      if (dev >= 0 && ensure_active()) recorder().on_teardown(api, dev, 0);
    }
  } else if (t_runtime_depth > 0) {
    --t_runtime_depth;
  }
}

void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
  if (!rd) return;
  CUcontext ctx = rd->context;
  if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
    // A new context may reuse a destroyed one's address.
    forget_context(ctx);
    return;
  }
  if (cbid != CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING || !ctx) return;
  // Nothing here may wait on CUPTI (no flush): other tools deadlocked on
  // exactly that during context teardown.
  if (ensure_active()) {
    ApiId api = ApiId::cuCtxDestroy_v2;
    if (t_runtime_depth > 0 && api_info(t_runtime[0]).role == Role::Teardown) api = t_runtime[0];
    recorder().on_teardown(api, device_of_context(ctx), context_id_of(ctx));
  }
  forget_context(ctx);
}

}  // namespace

CbidMap &cbid_map() {
  static constinit Lazy<CbidMap> m;
  return m.get();
}

void after_fork_child() {
  owner_after_fork_child();
  g_noted.store(false, std::memory_order_relaxed);
  t_runtime_depth = 0;  // only the forking thread survives, between calls
  if (FreeSlots *f = ThreadFrees::get()) f->depth = 0;
}

void set_delivery(bool open) { g_delivery.store(open, std::memory_order_release); }
bool delivery_open() { return g_delivery.load(std::memory_order_acquire); }

void CUPTIAPI on_cupti_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                const void *cbdata) {
  if (!g_delivery.load(std::memory_order_acquire) || t_busy || !cbdata) return;
  BusyScope busy;
  switch (domain) {
    case CUPTI_CB_DOMAIN_DRIVER_API:
    case CUPTI_CB_DOMAIN_RUNTIME_API: {
      auto *cb = static_cast<const CUpti_CallbackData *>(cbdata);
      ApiId api = cbid_map().lookup(domain, cbid, cb->functionName);
      if (api == ApiId::Unknown) return;
      // Only calls CUPTI owns (call_owner.h): the hooks record the others.
      bool enter = cb->callbackSite == CUPTI_API_ENTER;
      if (enter ? enter_call() : call_owned()) {
        if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
          on_driver(api, cb);
        else
          on_runtime(api, cb);
      }
      // Released once recorded: the handover may unsubscribe from then on.
      if (!enter) exit_call();
      break;
    }
    case CUPTI_CB_DOMAIN_RESOURCE:
      on_resource(cbid, static_cast<const CUpti_ResourceData *>(cbdata));
      break;
    default:
      break;
  }
}

}  // namespace torchseal::cupti
