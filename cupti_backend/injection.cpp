// CUDA_INJECTION64_PATH=libtorchseal.so: the driver dlopens the shim at
// cuInit and calls InitializeInjection(), the way NVIDIA's CUPTI injection
// samples are loaded. Without LD_PRELOAD nothing of the shim is interposed
// (the host's CUDA symbols and dlsym bound elsewhere first), so CUPTI is the
// only way in.
#include "common/util/log.h"
#include "cupti_backend/cupti_backend.h"
#include "shim/core/activation.h"
#include "shim/intercept/dlsym_hook.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  // Runs the shim's first-CUDA-call initialisation, which picks the backend
  // (and so calls cupti::start()) and logs a fallback itself.
  bool active = torchseal::ensure_active();
  if (active && torchseal::cupti::running()) return 1;
  if (torchseal::shim_interposed()) return active ? 1 : 0;  // preloaded too
  if (active)
    torchseal::log::warn(
        "loaded through CUDA_INJECTION64_PATH without LD_PRELOAD and CUPTI is not subscribed: "
        "nothing will be recorded");
  return 0;
}
