// The host's own cuptiSubscribe (torch.profiler's Kineto, a tracing tool):
// when CUPTI refuses it because torchseal holds the slot, torchseal hands the
// slot over (the hooks take over) and the host's call is made again, so the
// host gets its trace. Interposed only when the shim is preloaded, which is
// also when the hooks can take over. In multi-subscriber mode (CUPTI 13.3+)
// a host that asks for it shares the slot and nothing changes hands.
#include <cupti_callbacks.h>

#include "cupti_backend/cupti_backend.h"
#include "shim/intercept/real_symbol.h"

namespace {

// Forwards; makes the call again once the slot was handed over.
template <typename Subscribe>
CUptiResult subscribe_through(Subscribe subscribe) {
  CUptiResult r = subscribe();
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && torchseal::cupti::hand_over_slot())
    r = subscribe();
  return r;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata) {
  TS_REAL(cuptiSubscribe);
  if (!real) return CUPTI_ERROR_NOT_INITIALIZED;
  return subscribe_through([&] { return real(subscriber, callback, userdata); });
}

__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata,
                  CUpti_SubscriberParams *params) {
  TS_REAL(cuptiSubscribe_v2);
  if (!real) return CUPTI_ERROR_NOT_INITIALIZED;
  return subscribe_through([&] { return real(subscriber, callback, userdata, params); });
}

}  // extern "C"
