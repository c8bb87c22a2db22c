// The driver entry points torchseal wraps, with their exact prototypes.
// cuda.h maps the unversioned names onto the current variants with macros
// (cuMemAlloc -> cuMemAlloc_v2, cuGetProcAddress -> cuGetProcAddress_v2);
// we name the exported variants explicitly, so undo the macros we define.
#pragma once

#include <cuda.h>

#include "common/model/event.h"

#undef cuGetProcAddress

extern "C" {
// Exported by libcuda but declared only in cuda.h's legacy/per-thread sections.
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams);
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
}

namespace torchseal {

// Driver functions torchseal itself calls (never hooked, never recorded).
struct DriverQueries {
  CUresult (*ctx_get_current)(CUcontext *) = nullptr;
  CUresult (*ctx_get_device)(CUdevice *) = nullptr;
  CUresult (*primary_ctx_get_state)(CUdevice, unsigned int *, int *) = nullptr;
  CUresult (*device_get_count)(int *) = nullptr;
  // cuStreamGetCaptureInfo_v3 (CUDA 12.3+), else _v2: the capture's graph.
  CUresult (*capture_info_v3)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                              const CUgraphNode **, const CUgraphEdgeData **, size_t *) = nullptr;
  CUresult (*capture_info_v2)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                              const CUgraphNode **, size_t *) = nullptr;
};
const DriverQueries &driver_queries();

// True once CUDA is initialised and the process sees exactly one device:
// every allocation is then on ordinal 0, with no query per allocation.
bool one_device();

// The real driver function behind wrapper `id`, resolved on first use.
void *real_driver_function(ApiId id);
// Called with a function pointer that came out of the real driver (dlsym,
// cuGetProcAddress, cudaGetDriverEntryPoint). If it is one we wrap, records it
// as that wrapper's real target and returns the wrapper; else returns `pfn`.
void *wrap_driver_pointer(void *pfn);
// Exact-name lookup: is `name` a driver symbol we wrap? Returns our wrapper.
void *driver_wrapper_for_name(const char *name, ApiId *id);

}  // namespace torchseal
