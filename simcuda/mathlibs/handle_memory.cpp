#include "handle_memory.h"

#include <cuda_runtime_api.h>

namespace simmath {

void *device_alloc(std::size_t bytes)
{
    void *p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();  // the caller reports the failure in its own terms
        return nullptr;
    }
    return p;
}

void device_free(void *p)
{
    if (p)
        cudaFree(p);
}

void *pinned_alloc(std::size_t bytes)
{
    void *p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
    }
    return p;
}

}  // namespace simmath
