// What the runtime interposers and the driver wrappers share: forward the
// call, and tell the core (core/record_call.h) in the order its kind needs.
// Only the outermost hooked call of an active shim records (HookScope).
#pragma once

#include <cuda_runtime_api.h>

#include "shim/core/activation.h"
#include "shim/core/record_call.h"

namespace torchseal {

inline CallResult result_of(cudaError_t rc) {
  return rc == cudaSuccess                 ? CallResult::Ok
         : rc == cudaErrorMemoryAllocation ? CallResult::OutOfMemory
                                           : CallResult::Failed;
}

// Frees are reported *before* forwarding so the address cannot be handed out
// again in between; a free that then fails is undone.
template <typename Forward>
auto free_through(const CallArgs &c, Forward forward) -> decltype(forward()) {
  HookScope scope;
  if (!scope.record() || !records_free(c)) return forward();
  FreeToken token = record_free(c);
  auto rc = forward();
  free_returned(token, result_of(rc));
  return rc;
}

// A call that ends a context: reported before or after forwarding, as that
// API's rule (tears_down) says.
template <typename Forward>
auto teardown_through(CallArgs c, Forward forward) -> decltype(forward()) {
  HookScope scope;
  if (scope.record() && tears_down(c.api, CallSite::Enter, c)) record_teardown(c);
  auto rc = forward();
  c.result = result_of(rc);
  if (scope.record() && tears_down(c.api, CallSite::Exit, c)) record_teardown(c);
  return rc;
}

}  // namespace torchseal
