// Registered and mapped host memory: the runtime calls map one to one onto
// the driver's (cudaHostRegister* flags have the values of
// CU_MEMHOSTREGISTER_*), as the real runtime's do.
#include "runtime_internal.h"

using namespace simcudart;

extern "C" {

cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaHostRegister, _v4000, ptr, size, flags) {
        return ret(drv().cuMemHostRegister(ptr, size, flags));
    } SIM_RT_TRACED_END;
}

cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
    SIM_RT_INIT();
    SIM_RT_TRACED(cudaHostUnregister, _v4000, ptr) {
        return ret(drv().cuMemHostUnregister(ptr));
    } SIM_RT_TRACED_END;
}

// Pinned memory from cudaHostAlloc(cudaHostAllocMapped) or a registration;
// flags are reserved and must be 0.
cudaError_t CUDARTAPI cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    SIM_RT_INIT();
    if (!pDevice || flags != 0)
        return set_error(cudaErrorInvalidValue);
    CUdeviceptr d = 0;
    CUresult r = drv().cuMemHostGetDevicePointer(&d, pHost, 0);
    if (r == CUDA_SUCCESS)
        *pDevice = reinterpret_cast<void *>(d);
    return ret(r);
}

}  // extern "C"
