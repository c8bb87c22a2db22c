// What one driver call's *_params struct (generated_cuda_meta.h) says, as
// the core's CallArgs: the CUPTI backend's only per-API code, reading each
// argument with the same meaning functions as the hooks (core/call_args.h).
#pragma once

// Relative: the decoder's unit test builds without the shim's include path.
#include "shim/core/call_args.h"

namespace torchseal::cupti {

// Fills the argument fields of `out` (addr, size, stream, handle, and the
// device or context when the params name one) from `params` of driver API
// `id`. Output pointers (*dptr, *pp, *handle, *pPitch) are read only when
// `succeeded`: after a failed call they may hold anything. Returns false for
// an id it does not know.
bool decode_driver_params(ApiId id, const void *params, bool succeeded, CallArgs &out);

}  // namespace torchseal::cupti
