// Module registration and kernel launch. Kernels are recorded, never run:
// registration keeps no per-kernel state (PyTorch registers thousands at
// import), and launches only count and check their stream argument shape.
#include <algorithm>
#include <atomic>

#include <cuda_profiler_api.h>

#include "runtime_internal.h"

using namespace simcudart;

namespace {

std::atomic<unsigned long long> g_launches{0};

struct CallConfig {
    dim3 grid, block;
    size_t shared;
    void *stream;
};
constexpr int kMaxNesting = 32;
thread_local CallConfig t_configs[kMaxNesting];
thread_local int t_depth = 0;

cudaError_t record_launch()
{
    if (cudaError_t e = ensure_context())
        return set_error(e);
    g_launches.fetch_add(1, std::memory_order_relaxed);
    return cudaSuccess;
}

}  // namespace

extern "C" {

// Prototypes from crt/host_runtime.h and crt/device_functions.h, which only
// compile under nvcc.
void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle);
void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant,
                                 int global);
void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                        char *deviceAddress, const char *deviceName, int ext,
                                        size_t size, int constant, int global);
void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid,
                                      uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
char CUDARTAPI __cudaInitModule(void **fatCubinHandle);
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                                 void *stream);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *hostFunc);
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                              void **args, size_t sharedMem, cudaStream_t stream);

void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin)
{
    // The handle only has to be unique and non-null; the fatbin is not read.
    return new void *(fatCubin);
}

void CUDARTAPI __cudaRegisterFatBinaryEnd(void **) {}

void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle) { delete fatCubinHandle; }

void CUDARTAPI __cudaRegisterVar(void **, char *, char *, const char *, int, size_t, int, int) {}

void CUDARTAPI __cudaRegisterManagedVar(void **, void **, char *, const char *, int, size_t, int, int)
{
}

void CUDARTAPI __cudaRegisterFunction(void **, const char *, char *, const char *, int, uint3 *,
                                      uint3 *, dim3 *, dim3 *, int *)
{
}

char CUDARTAPI __cudaInitModule(void **) { return 1; }

unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream)
{
    if (t_depth == kMaxNesting)
        return 1;
    t_configs[t_depth++] = CallConfig{gridDim, blockDim, sharedMem, stream};
    return 0;
}

cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                                 void *stream)
{
    if (t_depth == 0)
        return set_error(cudaErrorMissingConfiguration);
    const CallConfig &c = t_configs[--t_depth];
    if (gridDim)
        *gridDim = c.grid;
    if (blockDim)
        *blockDim = c.block;
    if (sharedMem)
        *sharedMem = c.shared;
    if (stream)
        *static_cast<void **>(stream) = c.stream;
    return cudaSuccess;
}

cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *hostFunc)
{
    if (!kernel || !hostFunc)
        return set_error(cudaErrorInvalidDeviceFunction);
    // The host stub's address is a stable, unique kernel handle.
    *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void *>(hostFunc));
    return cudaSuccess;
}

cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t)
{
    return record_launch();
}

cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t)
{
    return record_launch();
}

cudaError_t CUDARTAPI cudaLaunchKernel(const void *func, dim3, dim3, void **, size_t, cudaStream_t)
{
    if (!func)
        return set_error(cudaErrorInvalidDeviceFunction);
    return record_launch();
}

cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3, dim3, void **, size_t,
                                            cudaStream_t)
{
    if (!func)
        return set_error(cudaErrorInvalidDeviceFunction);
    return record_launch();
}

cudaError_t CUDARTAPI cudaFuncGetAttributes(cudaFuncAttributes *attr, const void *func)
{
    if (!attr || !func)
        return set_error(cudaErrorInvalidDeviceFunction);
    *attr = cudaFuncAttributes{};
    attr->maxThreadsPerBlock = 1024;
    attr->numRegs = 32;
    attr->ptxVersion = 90;
    attr->binaryVersion = 90;
    attr->maxDynamicSharedSizeBytes = 49152;
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaFuncSetAttribute(const void *func, cudaFuncAttribute, int)
{
    return func ? cudaSuccess : set_error(cudaErrorInvalidDeviceFunction);
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    int *numBlocks, const void *func, int blockSize, size_t, unsigned int)
{
    if (!numBlocks || !func || blockSize <= 0)
        return set_error(cudaErrorInvalidValue);
    // 2048 resident threads and at most 32 blocks per SM (sm_90).
    *numBlocks = std::min(32, 2048 / blockSize);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func,
                                                                    int blockSize,
                                                                    size_t dynamicSMemSize)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks, func, blockSize,
                                                                  dynamicSMemSize, 0);
}

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode *mode)
{
    return mode ? cudaSuccess : set_error(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **)
{
    if (!config)
        return set_error(cudaErrorInvalidValue);
    if (!func)
        return set_error(cudaErrorInvalidDeviceFunction);
    return record_launch();
}

cudaError_t CUDARTAPI cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func,
                                               void **args)
{
    return cudaLaunchKernelExC(config, func, args);
}

// No profiler is attached; starting and stopping it succeed (cudaProfilerStart
// is what torch.cuda.profiler.start() calls).
cudaError_t CUDARTAPI cudaProfilerStart(void) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaProfilerStop(void) { return cudaSuccess; }

}  // extern "C"
