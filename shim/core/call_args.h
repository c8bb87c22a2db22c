// One intercepted call in the recorder's terms, and what each API's
// arguments mean. Every backend fills a CallArgs from its own source (the
// hook's parameters, CUPTI's *_params struct) with the functions here and
// hands it to the entry points in record_call.h, so an API's meaning is
// written once whichever way the call was seen.
//
// Self-contained (CUDA and the report's model only): the CUPTI decoder's
// unit test builds it without the shim's include path.
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/model/event.h"

namespace torchseal {

// How the real call ended. Failures other than out-of-memory are no events.
enum class CallResult : uint8_t { Ok, OutOfMemory, Failed };

inline CallResult result_of(CUresult rc) {
  return rc == CUDA_SUCCESS               ? CallResult::Ok
         : rc == CUDA_ERROR_OUT_OF_MEMORY ? CallResult::OutOfMemory
                                          : CallResult::Failed;
}

// Where a backend sees the call: before it is forwarded, or after it returned.
enum class CallSite : uint8_t { Enter, Exit };

struct CallArgs {
  ApiId api = ApiId::Unknown;  // reported under: the user-facing call
  Family family = Family::None;
  CallResult result = CallResult::Ok;
  int device = -1;       // -1: not known (a teardown then covers every device)
  uint32_t context = 0;  // context_id_of() the call's context, 0: not known
  uint64_t addr = 0;     // pointer allocated/freed/mapped, or a VMM handle
  uint64_t size = 0;     // bytes (requested bytes on failure)
  uint64_t stream = 0;   // stream handle, 0 for the legacy default stream
  uint64_t handle = 0;   // cuMemMap's physical handle
  uint64_t graph = 0;    // CUgraph of a graph call (Role::Graph)
  uint64_t exec = 0;     // CUgraphExec of an instantiation, launch or destroy
};

// The _ptsz entry points (code built for per-thread default streams) mean
// the calling thread's per-thread stream by stream 0, not the legacy one,
// and that stream can be captured: the capture is asked about, and the
// stream recorded, as CU_STREAM_PER_THREAD.
namespace call_detail {
// By ApiId, computed once at compile time (the hot path pays one load).
inline constexpr auto kPerThreadStream = [] {
  std::array<bool, static_cast<size_t>(ApiId::Count)> a{};
  for (size_t i = 0; i < a.size(); ++i) a[i] = kApiTable[i].name.ends_with("_ptsz");
  return a;
}();
}  // namespace call_detail
constexpr bool per_thread_default_stream(ApiId api) {
  return api < ApiId::Count && call_detail::kPerThreadStream[static_cast<size_t>(api)];
}
static_assert(per_thread_default_stream(ApiId::cudaMallocAsync_ptsz) &&
              !per_thread_default_stream(ApiId::cudaMallocAsync));
inline uint64_t stream_of(ApiId api, uint64_t stream) {
  return stream == 0 && per_thread_default_stream(api)
             ? reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD)
             : stream;
}

// A call of `api` with the family the API table gives it.
inline CallArgs call_args(ApiId api, uint64_t addr = 0, uint64_t size = 0, uint64_t stream = 0,
                          CallResult result = CallResult::Ok) {
  CallArgs c;
  c.api = api;
  c.family = api_info(api).family;
  c.result = result;
  c.addr = addr;
  c.size = size;
  c.stream = stream_of(api, stream);
  return c;
}

// cudaMallocPitch, cuMemAllocPitch and cudaMalloc3D (rows = height * depth):
// the pitch the driver chose is what is really allocated per row; it is
// read only once the call succeeded, before that it may hold anything.
inline uint64_t pitched_bytes(bool ok, const size_t *pitch, size_t width_bytes, size_t rows) {
  return (ok && pitch) ? *pitch * rows : width_bytes * rows;
}

// cuMemCreate: the device its properties place the memory on, or -1 when
// they do not name one (the caller's current device then).
inline int vmm_create_device(const CUmemAllocationProp *prop) {
  return (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? prop->location.id : -1;
}

// A graph allocation node's device (its pool location), or -1.
inline int graph_node_device(const CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  return (p && p->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE) ? p->poolProps.location.id
                                                                          : -1;
}

// Whether teardown call `call` frees the allocations of `c`'s context or
// device at `site`. Contexts are collected before the driver frees anything
// (like CUPTI's CONTEXT_DESTROY_STARTING); a primary context only once its
// last reference went, which the driver is asked after a successful
// release. A null context or a negative device tears nothing down.
bool tears_down(ApiId call, CallSite site, const CallArgs &c);

}  // namespace torchseal
