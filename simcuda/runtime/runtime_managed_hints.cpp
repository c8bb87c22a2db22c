// cudaMemPrefetchAsync and cudaMemAdvise: the driver checks the arguments
// (cudaMemLocation and cudaMemoryAdvise share the driver's values); managed
// memory never migrates in the simulation.
#include "runtime_internal.h"

using namespace simcudart;

namespace {

CUmemLocation cu_location(cudaMemLocation loc)
{
    CUmemLocation l{};
    l.type = static_cast<CUmemLocationType>(loc.type);
    l.id = loc.id;
    return l;
}

CUdeviceptr dp(const void *p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace

extern "C" {

cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *devPtr, size_t count,
                                           cudaMemLocation location, unsigned int flags,
                                           cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuMemPrefetchAsync(dp(devPtr), count, cu_location(location), flags, stream));
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count,
                                                cudaMemLocation location, unsigned int flags,
                                                cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count,
                                                cudaMemLocation location, unsigned int flags,
                                                cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(
        drv().cuMemPrefetchAsync_ptsz(dp(devPtr), count, cu_location(location), flags, stream));
}
SIM_SAME_TYPE(cudaMemPrefetchAsync_ptsz, cudaMemPrefetchAsync);

cudaError_t CUDARTAPI cudaMemAdvise(const void *devPtr, size_t count, cudaMemoryAdvise advice,
                                    cudaMemLocation location)
{
    SIM_RT_INIT();
    return ret(drv().cuMemAdvise(dp(devPtr), count, static_cast<CUmem_advise>(advice),
                                 cu_location(location)));
}

}  // extern "C"
