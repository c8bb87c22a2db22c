// generated_cuda_meta.h declares the params of every ABI variant, including
// the legacy _v1 ones whose types cuda.h only provides in its internal build
// mode. This file calls no CUDA function, so that mode's renaming is harmless.
#define __CUDA_API_VERSION_INTERNAL 1

#include "cupti_backend/param_decode.h"

#include <cuda.h>
#include <generated_cuda_meta.h>

#include "shim/core/context_id.h"

namespace torchseal::cupti {
namespace {

template <typename P>
const P &as(const void *params) {
  return *static_cast<const P *>(params);
}

uint64_t u64(const void *p) { return reinterpret_cast<uint64_t>(p); }

// Allocations returning a CUdeviceptr through `dptr`, with (bytesize, hStream).
template <typename P>
void device_alloc(const void *params, bool ok, CallArgs &a) {
  const P &p = as<P>(params);
  a.addr = (ok && p.dptr) ? *p.dptr : 0;
  a.size = p.bytesize;
  if constexpr (requires { p.hStream; }) a.stream = u64(p.hStream);
}

template <typename P>
void host_alloc(const void *params, bool ok, CallArgs &a) {
  const P &p = as<P>(params);
  a.addr = (ok && p.pp) ? u64(*p.pp) : 0;
  a.size = p.bytesize;
}

template <typename P>
void async_free(const void *params, CallArgs &a) {
  const P &p = as<P>(params);
  a.addr = p.dptr;
  a.stream = u64(p.hStream);
}

// VMM address ranges given as (ptr, size).
template <typename P>
void range(const void *params, CallArgs &a) {
  const P &p = as<P>(params);
  a.addr = p.ptr;
  a.size = p.size;
}

template <typename P>
void instantiate(const void *params, bool ok, CallArgs &a) {
  const P &p = as<P>(params);
  a.graph = u64(p.hGraph);
  a.exec = (ok && p.phGraphExec) ? u64(*p.phGraphExec) : 0;
}

template <typename P>
void launch(const void *params, CallArgs &a) {
  const P &p = as<P>(params);
  if constexpr (requires { p.hGraphExec; })
    a.exec = u64(p.hGraphExec);
  else
    a.exec = u64(p.hGraph);  // cuGraphLaunch_params names the exec hGraph
  a.stream = u64(p.hStream);
}

bool decode_by_api(ApiId id, const void *params, bool ok, CallArgs &a) {
  switch (id) {
    case ApiId::cuMemAlloc_v2:
      device_alloc<cuMemAlloc_v2_params>(params, ok, a);
      return true;
    case ApiId::cuMemAllocAsync:
      device_alloc<cuMemAllocAsync_params>(params, ok, a);
      return true;
    case ApiId::cuMemAllocAsync_ptsz:
      device_alloc<cuMemAllocAsync_ptsz_params>(params, ok, a);
      return true;
    case ApiId::cuMemAllocFromPoolAsync:
      device_alloc<cuMemAllocFromPoolAsync_params>(params, ok, a);
      return true;
    case ApiId::cuMemAllocFromPoolAsync_ptsz:
      device_alloc<cuMemAllocFromPoolAsync_ptsz_params>(params, ok, a);
      return true;
    case ApiId::cuMemAllocManaged:
      device_alloc<cuMemAllocManaged_params>(params, ok, a);
      return true;
    case ApiId::cuMemAllocPitch_v2: {
      const auto &p = as<cuMemAllocPitch_v2_params>(params);
      a.addr = (ok && p.dptr) ? *p.dptr : 0;
      a.size = pitched_bytes(ok, p.pPitch, p.WidthInBytes, p.Height);
      return true;
    }
    case ApiId::cuMemFree_v2:
      a.addr = as<cuMemFree_v2_params>(params).dptr;
      return true;
    case ApiId::cuMemFreeAsync:
      async_free<cuMemFreeAsync_params>(params, a);
      return true;
    case ApiId::cuMemFreeAsync_ptsz:
      async_free<cuMemFreeAsync_ptsz_params>(params, a);
      return true;
    case ApiId::cuMemAllocHost_v2:
      host_alloc<cuMemAllocHost_v2_params>(params, ok, a);
      return true;
    case ApiId::cuMemHostAlloc:
      host_alloc<cuMemHostAlloc_params>(params, ok, a);
      return true;
    case ApiId::cuMemFreeHost:
      a.addr = u64(as<cuMemFreeHost_params>(params).p);
      return true;
    case ApiId::cuMemHostRegister_v2: {
      // The registered range is the leak unit.
      const auto &p = as<cuMemHostRegister_v2_params>(params);
      a.addr = u64(p.p);
      a.size = p.bytesize;
      return true;
    }
    case ApiId::cuMemHostUnregister:
      a.addr = u64(as<cuMemHostUnregister_params>(params).p);
      return true;
    case ApiId::cuMemCreate: {
      const auto &p = as<cuMemCreate_params>(params);
      a.addr = (ok && p.handle) ? *p.handle : 0;
      a.size = p.size;
      a.device = vmm_create_device(p.prop);
      return true;
    }
    case ApiId::cuMemRelease:
      a.addr = as<cuMemRelease_params>(params).handle;
      return true;
    case ApiId::cuMemRetainAllocationHandle: {
      const auto &p = as<cuMemRetainAllocationHandle_params>(params);
      a.addr = (ok && p.handle) ? *p.handle : 0;
      return true;
    }
    case ApiId::cuMemMap:
      range<cuMemMap_params>(params, a);
      a.handle = as<cuMemMap_params>(params).handle;
      return true;
    case ApiId::cuMemUnmap:
      range<cuMemUnmap_params>(params, a);
      return true;
    case ApiId::cuMemAddressReserve: {
      const auto &p = as<cuMemAddressReserve_params>(params);
      a.addr = (ok && p.ptr) ? *p.ptr : 0;
      a.size = p.size;
      return true;
    }
    case ApiId::cuMemAddressFree:
      range<cuMemAddressFree_params>(params, a);
      return true;
    case ApiId::cuCtxDestroy_v2:
      a.context = context_id_of(as<cuCtxDestroy_v2_params>(params).ctx);
      return true;
    case ApiId::cuDevicePrimaryCtxReset_v2:
      a.device = as<cuDevicePrimaryCtxReset_v2_params>(params).dev;
      return true;
    case ApiId::cuDevicePrimaryCtxRelease_v2:
      a.device = as<cuDevicePrimaryCtxRelease_v2_params>(params).dev;
      return true;
    case ApiId::cuGraphAddMemAllocNode: {
      const auto &p = as<cuGraphAddMemAllocNode_params>(params);
      a.graph = u64(p.hGraph);
      a.addr = (ok && p.nodeParams) ? p.nodeParams->dptr : 0;
      a.size = p.nodeParams ? p.nodeParams->bytesize : 0;
      a.device = graph_node_device(p.nodeParams);
      return true;
    }
    case ApiId::cuGraphAddMemFreeNode: {
      const auto &p = as<cuGraphAddMemFreeNode_params>(params);
      a.graph = u64(p.hGraph);
      a.addr = p.dptr;
      return true;
    }
    case ApiId::cuGraphInstantiateWithFlags:
      instantiate<cuGraphInstantiateWithFlags_params>(params, ok, a);
      return true;
    case ApiId::cuGraphInstantiateWithParams:
      instantiate<cuGraphInstantiateWithParams_params>(params, ok, a);
      return true;
    case ApiId::cuGraphInstantiateWithParams_ptsz:
      instantiate<cuGraphInstantiateWithParams_ptsz_params>(params, ok, a);
      return true;
    case ApiId::cuGraphLaunch:
      launch<cuGraphLaunch_params>(params, a);
      return true;
    case ApiId::cuGraphLaunch_ptsz:
      launch<cuGraphLaunch_ptsz_params>(params, a);
      return true;
    case ApiId::cuGraphExecDestroy:
      a.exec = u64(as<cuGraphExecDestroy_params>(params).hGraphExec);
      return true;
    case ApiId::cuGraphDestroy:
      a.graph = u64(as<cuGraphDestroy_params>(params).hGraph);
      return true;
    case ApiId::cuStreamBeginCapture_v2:
      a.stream = u64(as<cuStreamBeginCapture_v2_params>(params).hStream);
      return true;
    case ApiId::cuStreamBeginCapture_v2_ptsz:
      a.stream = u64(as<cuStreamBeginCapture_v2_ptsz_params>(params).hStream);
      return true;
    case ApiId::cuStreamEndCapture:
      a.stream = u64(as<cuStreamEndCapture_params>(params).hStream);
      return true;
    case ApiId::cuStreamEndCapture_ptsz:
      a.stream = u64(as<cuStreamEndCapture_ptsz_params>(params).hStream);
      return true;
    default:
      return false;
  }
}

}  // namespace

bool decode_driver_params(ApiId id, const void *params, bool ok, CallArgs &a) {
  if (!params || !decode_by_api(id, params, ok, a)) return false;
  a.stream = stream_of(id, a.stream);  // as call_args: a _ptsz call's 0
  return true;
}

}  // namespace torchseal::cupti
