// What one driver call's *_params struct (generated_cuda_meta.h) says, in
// the terms the recorder uses. The only per-API code of the CUPTI backend:
// everything else is driven by the role and family columns of the API table.
#pragma once

#include <cstdint>

#include "report/model/event.h"

namespace torchseal::cupti {

struct CallArgs {
  uint64_t addr = 0;    // pointer allocated/freed/mapped, or a VMM handle
  uint64_t size = 0;    // bytes (requested bytes on failure)
  uint64_t stream = 0;  // CUstream value, 0 for the legacy default stream
  uint64_t handle = 0;  // cuMemMap's physical handle
  int device = -1;      // when the params name it (cuMemCreate prop, PrimaryCtx dev)
  const void *ctx = nullptr;  // cuCtxDestroy_v2's context
};

// Decodes `params` for driver API `id`. Output pointers (*dptr, *pp,
// *handle, *pPitch) are read only when `succeeded`: after a failed call they
// may hold anything. Returns false for an id it does not know.
bool decode_driver_params(ApiId id, const void *params, bool succeeded, CallArgs &out);

}  // namespace torchseal::cupti
