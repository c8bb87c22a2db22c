#include "shim/core/call_args.h"

#include "shim/core/driver_api.h"

namespace torchseal {
namespace {

// The driver keeps a primary context alive while any reference to it
// remains: it is gone only if the driver now says it is inactive.
bool primary_context_gone(int device) {
  auto state = driver_queries().primary_ctx_get_state;
  unsigned int flags = 0;
  int active = 1;
  return state && state(device, &flags, &active) == CUDA_SUCCESS && !active;
}

}  // namespace

bool tears_down(ApiId call, CallSite site, const CallArgs &c) {
  switch (call) {
    case ApiId::cudaDeviceReset:
      // An unknown device (-1) means every device: the reset's own driver
      // calls are not seen separately by the hooks.
      return site == CallSite::Enter;
    case ApiId::cuCtxDestroy_v2:
      return site == CallSite::Enter && c.context != 0;
    case ApiId::cuDevicePrimaryCtxReset_v2:
      return site == CallSite::Enter && c.device >= 0;
    case ApiId::cuDevicePrimaryCtxRelease_v2:
      return site == CallSite::Exit && c.result == CallResult::Ok && c.device >= 0 &&
             primary_context_gone(c.device);
    default:
      return false;
  }
}

}  // namespace torchseal
