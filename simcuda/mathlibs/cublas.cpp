// Simulated cuBLAS: handles and their state. The BLAS routines themselves are
// generated no-ops (gen_stubs.py --noop), as simcuda's kernels are.
#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <new>

#include "handle_memory.h"
#include "status_names.h"

// Per handle, cublasCreate makes three device allocations through the
// library's static runtime (measured on an H100 with cuBLAS 13: 64 MiB,
// 128 KiB and 1 KiB, 67,240,960 B in all); cublasDestroy frees them.
struct cublasContext {
    void *workspace = nullptr;
    void *scratch = nullptr;
    void *state = nullptr;
    cudaStream_t stream = nullptr;
    void *user_workspace = nullptr;
    size_t user_workspace_bytes = 0;
    cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
    cublasAtomicsMode_t atomics = CUBLAS_ATOMICS_NOT_ALLOWED;
    cublasMath_t math = CUBLAS_DEFAULT_MATH;
    int sm_count_target = 0;
};

namespace {

constexpr size_t kWorkspaceBytes = 64u << 20;
constexpr size_t kScratchBytes = 128u << 10;
constexpr size_t kStateBytes = 1u << 10;

void release(cublasContext *h)
{
    simmath::device_free(h->state);
    simmath::device_free(h->scratch);
    simmath::device_free(h->workspace);
    delete h;
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t *handle)
{
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    auto *h = new (std::nothrow) cublasContext;
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    h->workspace = simmath::device_alloc(kWorkspaceBytes);
    h->scratch = h->workspace ? simmath::device_alloc(kScratchBytes) : nullptr;
    h->state = h->scratch ? simmath::device_alloc(kStateBytes) : nullptr;
    if (!h->state) {
        release(h);
        // What cuBLAS answers when its context cannot be set up.
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    *handle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    release(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetVersion_v2(cublasHandle_t handle, int *version)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!version)
        return CUBLAS_STATUS_INVALID_VALUE;
    *version = CUBLAS_VERSION;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (type) {
    case MAJOR_VERSION: *value = CUBLAS_VER_MAJOR; break;
    case MINOR_VERSION: *value = CUBLAS_VER_MINOR; break;
    case PATCH_LEVEL: *value = CUBLAS_VER_PATCH; break;
    default: return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

size_t CUBLASWINAPI cublasGetCudartVersion(void) { return CUDART_VERSION; }

cublasStatus_t CUBLASWINAPI cublasSetWorkspace_v2(cublasHandle_t handle, void *workspace,
                                                  size_t workspaceSizeInBytes)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (workspaceSizeInBytes && !workspace)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->user_workspace = workspace;
    handle->user_workspace_bytes = workspaceSizeInBytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->stream = streamId;
    // As documented: setting a stream resets the workspace to the default.
    handle->user_workspace = nullptr;
    handle->user_workspace_bytes = 0;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasGetStream_v2(cublasHandle_t handle, cudaStream_t *streamId)
{
    if (!handle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!streamId)
        return CUBLAS_STATUS_INVALID_VALUE;
    *streamId = handle->stream;
    return CUBLAS_STATUS_SUCCESS;
}

#define SIMCUBLAS_MODE(Get, Set, field, type)                                       \
    cublasStatus_t CUBLASWINAPI Get(cublasHandle_t handle, type *mode)              \
    {                                                                               \
        if (!handle)                                                                \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                   \
        if (!mode)                                                                  \
            return CUBLAS_STATUS_INVALID_VALUE;                                     \
        *mode = handle->field;                                                      \
        return CUBLAS_STATUS_SUCCESS;                                               \
    }                                                                               \
    cublasStatus_t CUBLASWINAPI Set(cublasHandle_t handle, type mode)               \
    {                                                                               \
        if (!handle)                                                                \
            return CUBLAS_STATUS_NOT_INITIALIZED;                                   \
        handle->field = mode;                                                       \
        return CUBLAS_STATUS_SUCCESS;                                               \
    }
SIMCUBLAS_MODE(cublasGetPointerMode_v2, cublasSetPointerMode_v2, pointer_mode, cublasPointerMode_t)
SIMCUBLAS_MODE(cublasGetAtomicsMode, cublasSetAtomicsMode, atomics, cublasAtomicsMode_t)
SIMCUBLAS_MODE(cublasGetMathMode, cublasSetMathMode, math, cublasMath_t)
SIMCUBLAS_MODE(cublasGetSmCountTarget, cublasSetSmCountTarget, sm_count_target, int)
#undef SIMCUBLAS_MODE

const char *CUBLASWINAPI cublasGetStatusName(cublasStatus_t status)
{
    return simmath::cublas_status_name(status);
}

const char *CUBLASWINAPI cublasGetStatusString(cublasStatus_t status)
{
    return simmath::cublas_status_string(status);
}

}  // extern "C"
