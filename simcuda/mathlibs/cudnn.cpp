// Simulated cuDNN (legacy API): handles, descriptors, algorithm queries.
// The compute routines are generated no-ops (gen_stubs.py --noop), as
// simcuda's kernels are; the graph API is in cudnn_backend.cpp.
#include <cudnn.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "handle_memory.h"

// Per handle, cudnnCreate makes two device allocations of 25,348 B in all
// and one 4-byte cuMemHostAlloc buffer (measured on an H100 with cuDNN 9).
// cudnnDestroy frees the device memory; the pinned buffer is never freed, as
// on the GPU. How the 25,348 B split between the two is not measured.
struct cudnnContext {
    void *device[2] = {};
    cudaStream_t stream = nullptr;
};

namespace {

// The version reported: cuDNN 9 with the highest minor. cuDNN 9 minors are
// backwards compatible, and PyTorch refuses a runtime whose minor is below
// the one it was built against (torch 2.15: 9.26; the toolkit's headers
// here: 9.19), so the simulation claims to be newer than any of them. The
// ABI (export list, prototypes) is the toolkit's.
constexpr int kMinor = 99;
constexpr size_t kVersion = CUDNN_MAJOR * 10000 + kMinor * 100;

constexpr size_t kDeviceBytes[] = {25344, 4};
constexpr size_t kPinnedBytes = 4;

// One descriptor shape for all the legacy kinds: what a tensor or filter
// descriptor must give back, and nothing for the rest.
struct Desc {
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
    int dims = 0;
    int dim[CUDNN_DIM_MAX] = {};
    int stride[CUDNN_DIM_MAX] = {};
};

template <typename T>
Desc *as_desc(T d)
{
    return reinterpret_cast<Desc *>(d);
}

template <typename T>
cudnnStatus_t create(T *out)
{
    if (!out)
        return CUDNN_STATUS_BAD_PARAM;
    auto *d = new (std::nothrow) Desc;
    if (!d)
        return CUDNN_STATUS_ALLOC_FAILED;
    *out = reinterpret_cast<T>(d);
    return CUDNN_STATUS_SUCCESS;
}

template <typename T>
cudnnStatus_t destroy(T d)
{
    delete as_desc(d);
    return CUDNN_STATUS_SUCCESS;
}

// The one algorithm of each kind simulated: number 0, no workspace.
template <typename Perf>
cudnnStatus_t one_algorithm(cudnnHandle_t handle, int requested, int *returned, Perf *perf)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    if (requested < 1 || !returned || !perf)
        return CUDNN_STATUS_BAD_PARAM;
    std::memset(perf, 0, sizeof *perf);
    perf->status = CUDNN_STATUS_SUCCESS;
    perf->determinism = CUDNN_DETERMINISTIC;
    perf->mathType = CUDNN_DEFAULT_MATH;
    *returned = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t no_workspace(cudnnHandle_t handle, size_t *size)
{
    if (!handle || !size)
        return CUDNN_STATUS_BAD_PARAM;
    *size = 0;
    return CUDNN_STATUS_SUCCESS;
}

void release(cudnnContext *h)
{
    for (void *p : h->device)
        simmath::device_free(p);
    delete h;
}

}  // namespace

extern "C" {

size_t CUDNNWINAPI cudnnGetVersion(void) { return kVersion; }
size_t CUDNNWINAPI cudnnGetMaxDeviceVersion(void) { return 1200; }
size_t CUDNNWINAPI cudnnGetCudartVersion(void) { return CUDART_VERSION; }

const char *CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status)
{
    switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
    case CUDNN_STATUS_ALLOC_FAILED: return "CUDNN_STATUS_ALLOC_FAILED";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
    default: return "CUDNN_STATUS_UNKNOWN";
    }
}

void CUDNNWINAPI cudnnGetLastErrorString(char *message, size_t max_size)
{
    if (message && max_size)
        message[0] = '\0';
}

cudnnStatus_t CUDNNWINAPI cudnnGetProperty(libraryPropertyType type, int *value)
{
    if (!value)
        return CUDNN_STATUS_BAD_PARAM;
    switch (type) {
    case MAJOR_VERSION: *value = CUDNN_MAJOR; break;
    case MINOR_VERSION: *value = kMinor; break;
    case PATCH_LEVEL: *value = 0; break;
    default: return CUDNN_STATUS_BAD_PARAM;
    }
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGraphVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t CUDNNWINAPI cudnnOpsVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t CUDNNWINAPI cudnnCnnVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }
cudnnStatus_t CUDNNWINAPI cudnnAdvVersionCheck(void) { return CUDNN_STATUS_SUCCESS; }

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t *handle)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    auto *h = new (std::nothrow) cudnnContext;
    if (!h)
        return CUDNN_STATUS_ALLOC_FAILED;
    for (size_t i = 0; i < 2; ++i) {
        h->device[i] = simmath::device_alloc(kDeviceBytes[i]);
        if (!h->device[i]) {
            release(h);
            return CUDNN_STATUS_NOT_INITIALIZED;
        }
    }
    // Deliberately never freed: cuDNN 9 keeps this buffer past cudnnDestroy.
    if (!simmath::pinned_alloc(kPinnedBytes)) {
        release(h);
        return CUDNN_STATUS_NOT_INITIALIZED;
    }
    *handle = h;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    release(handle);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId)
{
    if (!handle)
        return CUDNN_STATUS_BAD_PARAM;
    handle->stream = streamId;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId)
{
    if (!handle || !streamId)
        return CUDNN_STATUS_BAD_PARAM;
    *streamId = handle->stream;
    return CUDNN_STATUS_SUCCESS;
}

#define SIMCUDNN_KIND(Kind, type)                                                      \
    cudnnStatus_t CUDNNWINAPI cudnnCreate##Kind##Descriptor(type *d) { return create(d); } \
    cudnnStatus_t CUDNNWINAPI cudnnDestroy##Kind##Descriptor(type d) { return destroy(d); }
SIMCUDNN_KIND(Tensor, cudnnTensorDescriptor_t)
SIMCUDNN_KIND(Filter, cudnnFilterDescriptor_t)
SIMCUDNN_KIND(Convolution, cudnnConvolutionDescriptor_t)
SIMCUDNN_KIND(Activation, cudnnActivationDescriptor_t)
SIMCUDNN_KIND(Pooling, cudnnPoolingDescriptor_t)
SIMCUDNN_KIND(Dropout, cudnnDropoutDescriptor_t)
SIMCUDNN_KIND(SpatialTransformer, cudnnSpatialTransformerDescriptor_t)
SIMCUDNN_KIND(CTCLoss, cudnnCTCLossDescriptor_t)
SIMCUDNN_KIND(RNN, cudnnRNNDescriptor_t)
SIMCUDNN_KIND(RNNData, cudnnRNNDataDescriptor_t)
#undef SIMCUDNN_KIND

cudnnStatus_t CUDNNWINAPI cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t tensorDesc,
                                                     cudnnDataType_t dataType, int nbDims,
                                                     const int dimA[], const int strideA[])
{
    if (!tensorDesc || nbDims < 1 || nbDims > CUDNN_DIM_MAX || !dimA || !strideA)
        return CUDNN_STATUS_BAD_PARAM;
    Desc *d = as_desc(tensorDesc);
    d->type = dataType;
    d->dims = nbDims;
    std::copy(dimA, dimA + nbDims, d->dim);
    std::copy(strideA, strideA + nbDims, d->stride);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetTensorNdDescriptor(const cudnnTensorDescriptor_t tensorDesc,
                                                     int nbDimsRequested,
                                                     cudnnDataType_t *dataType, int *nbDims,
                                                     int dimA[], int strideA[])
{
    if (!tensorDesc || !dataType || !nbDims || nbDimsRequested < 0)
        return CUDNN_STATUS_BAD_PARAM;
    const Desc *d = as_desc(tensorDesc);
    *dataType = d->type;
    *nbDims = d->dims;
    int n = std::min(nbDimsRequested, d->dims);
    if (n && (!dimA || !strideA))
        return CUDNN_STATUS_BAD_PARAM;
    std::copy(d->dim, d->dim + n, dimA);
    std::copy(d->stride, d->stride + n, strideA);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t filterDesc,
                                                     cudnnDataType_t dataType,
                                                     cudnnTensorFormat_t format, int nbDims,
                                                     const int filterDimA[])
{
    if (!filterDesc || nbDims < 1 || nbDims > CUDNN_DIM_MAX || !filterDimA)
        return CUDNN_STATUS_BAD_PARAM;
    Desc *d = as_desc(filterDesc);
    d->type = dataType;
    d->format = format;
    d->dims = nbDims;
    std::copy(filterDimA, filterDimA + nbDims, d->dim);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetFilterNdDescriptor(const cudnnFilterDescriptor_t filterDesc,
                                                     int nbDimsRequested,
                                                     cudnnDataType_t *dataType,
                                                     cudnnTensorFormat_t *format, int *nbDims,
                                                     int filterDimA[])
{
    if (!filterDesc || !dataType || !format || !nbDims || nbDimsRequested < 0)
        return CUDNN_STATUS_BAD_PARAM;
    const Desc *d = as_desc(filterDesc);
    *dataType = d->type;
    *format = d->format;
    *nbDims = d->dims;
    int n = std::min(nbDimsRequested, d->dims);
    if (n && !filterDimA)
        return CUDNN_STATUS_BAD_PARAM;
    std::copy(d->dim, d->dim + n, filterDimA);
    return CUDNN_STATUS_SUCCESS;
}

// Settings the simulation has no use for: checked for a descriptor, kept nowhere.
cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t convDesc,
                                                          int arrayLength, const int padA[],
                                                          const int filterStrideA[],
                                                          const int dilationA[],
                                                          cudnnConvolutionMode_t,
                                                          cudnnDataType_t)
{
    if (!convDesc || arrayLength < 1 || !padA || !filterStrideA || !dilationA)
        return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t convDesc,
                                                        int groupCount)
{
    return convDesc && groupCount >= 1 ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc,
                                                      cudnnMathType_t)
{
    return convDesc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnSetActivationDescriptor(cudnnActivationDescriptor_t activationDesc,
                                                       cudnnActivationMode_t,
                                                       cudnnNanPropagation_t, double)
{
    return activationDesc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t poolingDesc,
                                                      cudnnPoolingMode_t, cudnnNanPropagation_t,
                                                      int, int, int, int, int, int)
{
    return poolingDesc ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnDropoutGetStatesSize(cudnnHandle_t handle, size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t dropoutDesc,
                                                    cudnnHandle_t handle, float, void *, size_t,
                                                    unsigned long long)
{
    return dropoutDesc && handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnRestoreDropoutDescriptor(cudnnDropoutDescriptor_t dropoutDesc,
                                                        cudnnHandle_t handle, float, void *,
                                                        size_t, unsigned long long)
{
    return dropoutDesc && handle ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t, const cudnnFilterDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionFwdAlgoPerf_t *perfResults)
{
    return one_algorithm(handle, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdDataAlgoPerf_t *perfResults)
{
    return one_algorithm(handle, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnFilterDescriptor_t, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults)
{
    return one_algorithm(handle, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t, const void *,
    const cudnnFilterDescriptor_t, const void *, const cudnnConvolutionDescriptor_t,
    const cudnnTensorDescriptor_t, void *, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionFwdAlgoPerf_t *perfResults, void *, size_t)
{
    return one_algorithm(handle, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t, const void *,
    const cudnnTensorDescriptor_t, const void *, const cudnnConvolutionDescriptor_t,
    const cudnnTensorDescriptor_t, void *, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdDataAlgoPerf_t *perfResults, void *, size_t)
{
    return one_algorithm(handle, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionBackwardFilterAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t, const void *,
    const cudnnTensorDescriptor_t, const void *, const cudnnConvolutionDescriptor_t,
    const cudnnFilterDescriptor_t, void *, const int requestedAlgoCount, int *returnedAlgoCount,
    cudnnConvolutionBwdFilterAlgoPerf_t *perfResults, void *, size_t)
{
    return one_algorithm(handle, requestedAlgoCount, returnedAlgoCount, perfResults);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t, const cudnnFilterDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t, cudnnConvolutionFwdAlgo_t,
    size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnTensorDescriptor_t,
    cudnnConvolutionBwdDataAlgo_t, size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnConvolutionDescriptor_t, const cudnnFilterDescriptor_t,
    cudnnConvolutionBwdFilterAlgo_t, size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t, cudnnBatchNormOps_t,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnTensorDescriptor_t, const cudnnActivationDescriptor_t, size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetBatchNormalizationBackwardExWorkspaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t, cudnnBatchNormOps_t,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t, const cudnnTensorDescriptor_t,
    const cudnnActivationDescriptor_t, size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

cudnnStatus_t CUDNNWINAPI cudnnGetBatchNormalizationTrainingExReserveSpaceSize(
    cudnnHandle_t handle, cudnnBatchNormMode_t, cudnnBatchNormOps_t,
    const cudnnActivationDescriptor_t, const cudnnTensorDescriptor_t, size_t *sizeInBytes)
{
    return no_workspace(handle, sizeInBytes);
}

}  // extern "C"
