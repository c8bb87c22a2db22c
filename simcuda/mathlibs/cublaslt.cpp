// Simulated cuBLASLt: handles, descriptors and one heuristic answer per
// request. cublasLtMatmul checks its arguments and computes nothing, as
// simcuda's kernels do.
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <vector>

#include "handle_memory.h"
#include "status_names.h"

// No measurement of cublasLtCreate on a GPU exists here; it is simulated as
// making the same three device allocations per handle as cublasCreate (64 MiB,
// 128 KiB, 1 KiB), freed by cublasLtDestroy.
struct cublasLtContext {
    void *memory[3] = {};
};

namespace {

constexpr size_t kHandleBytes[] = {64u << 20, 128u << 10, 1u << 10};

void release(cublasLtContext *h)
{
    for (void *p : h->memory)
        simmath::device_free(p);
    delete h;
}

// Attribute values by attribute id, for the descriptors' Set/Get pairs.
// An attribute never set reads as zeros of the caller's size (the documented
// defaults of the attributes torch reads are 0 or null).
struct Attributes {
    std::map<int, std::vector<unsigned char>> values;

    cublasStatus_t set(int attr, const void *buf, size_t size)
    {
        if (!buf && size)
            return CUBLAS_STATUS_INVALID_VALUE;
        auto *p = static_cast<const unsigned char *>(buf);
        values[attr].assign(p, p + size);
        return CUBLAS_STATUS_SUCCESS;
    }

    cublasStatus_t get(int attr, void *buf, size_t size, size_t *written) const
    {
        auto it = values.find(attr);
        size_t have = it == values.end() ? size : it->second.size();
        if (size == 0) {
            if (!written)
                return CUBLAS_STATUS_INVALID_VALUE;
            *written = have;
            return CUBLAS_STATUS_SUCCESS;
        }
        if (!buf)
            return CUBLAS_STATUS_INVALID_VALUE;
        std::memset(buf, 0, size);
        if (it != values.end())
            std::memcpy(buf, it->second.data(), std::min(size, have));
        if (written)
            *written = std::min(size, have);
        return CUBLAS_STATUS_SUCCESS;
    }
};

// The semi-opaque public structs come first, so a descriptor's pointer is
// the pointer the API hands out.
struct MatmulDesc {
    cublasLtMatmulDescOpaque_t opaque{};
    Attributes attrs;
};
struct MatrixLayout {
    cublasLtMatrixLayoutOpaque_t opaque{};
    Attributes attrs;
};
struct Preference {
    cublasLtMatmulPreferenceOpaque_t opaque{};
    Attributes attrs;
};

template <typename Desc, typename Public>
Desc *desc(Public p)
{
    return reinterpret_cast<Desc *>(p);
}

// The one algorithm simulated: id 0, every configuration value 0.
void init_algo(cublasLtMatmulAlgo_t *algo)
{
    std::memset(algo, 0, sizeof *algo);
}

}  // namespace

extern "C" {

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t *lightHandle)
{
    if (!lightHandle)
        return CUBLAS_STATUS_INVALID_VALUE;
    auto *h = new (std::nothrow) cublasLtContext;
    if (!h)
        return CUBLAS_STATUS_ALLOC_FAILED;
    for (size_t i = 0; i < 3; ++i) {
        h->memory[i] = simmath::device_alloc(kHandleBytes[i]);
        if (!h->memory[i]) {
            release(h);
            return CUBLAS_STATUS_NOT_INITIALIZED;
        }
    }
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t lightHandle)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    release(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

const char *CUBLASWINAPI cublasLtGetStatusName(cublasStatus_t status)
{
    return simmath::cublas_status_name(status);
}

const char *CUBLASWINAPI cublasLtGetStatusString(cublasStatus_t status)
{
    return simmath::cublas_status_string(status);
}

size_t CUBLASWINAPI cublasLtGetVersion(void) { return CUBLAS_VERSION; }

size_t CUBLASWINAPI cublasLtGetCudartVersion(void) { return CUDART_VERSION; }

cublasStatus_t CUBLASWINAPI cublasLtGetProperty(libraryPropertyType type, int *value)
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

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                                     cublasComputeType_t computeType,
                                                     cudaDataType_t scaleType)
{
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    auto *d = new (std::nothrow) MatmulDesc;
    if (!d)
        return CUBLAS_STATUS_ALLOC_FAILED;
    d->attrs.set(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &computeType, sizeof computeType);
    d->attrs.set(CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scaleType, sizeof scaleType);
    *matmulDesc = &d->opaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc)
{
    delete desc<MatmulDesc>(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           const void *buf, size_t sizeInBytes)
{
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc<MatmulDesc>(matmulDesc)->attrs.set(attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                           cublasLtMatmulDescAttributes_t attr,
                                                           void *buf, size_t sizeInBytes,
                                                           size_t *sizeWritten)
{
    if (!matmulDesc)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc<MatmulDesc>(matmulDesc)->attrs.get(attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                                       cudaDataType type, uint64_t rows,
                                                       uint64_t cols, int64_t ld)
{
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    auto *d = new (std::nothrow) MatrixLayout;
    if (!d)
        return CUBLAS_STATUS_ALLOC_FAILED;
    d->attrs.set(CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type);
    d->attrs.set(CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows);
    d->attrs.set(CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
    d->attrs.set(CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
    *matLayout = &d->opaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout)
{
    delete desc<MatrixLayout>(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             const void *buf, size_t sizeInBytes)
{
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc<MatrixLayout>(matLayout)->attrs.set(attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                             cublasLtMatrixLayoutAttribute_t attr,
                                                             void *buf, size_t sizeInBytes,
                                                             size_t *sizeWritten)
{
    if (!matLayout)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc<MatrixLayout>(matLayout)->attrs.get(attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref)
{
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    auto *d = new (std::nothrow) Preference;
    if (!d)
        return CUBLAS_STATUS_ALLOC_FAILED;
    *pref = &d->opaque;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref)
{
    delete desc<Preference>(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
    size_t sizeInBytes)
{
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc<Preference>(pref)->attrs.set(attr, buf, sizeInBytes);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr, void *buf,
    size_t sizeInBytes, size_t *sizeWritten)
{
    if (!pref)
        return CUBLAS_STATUS_INVALID_VALUE;
    return desc<Preference>(pref)->attrs.get(attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[], int *returnAlgoCount)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!operationDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !preference ||
        requestedAlgoCount < 1 || !heuristicResultsArray || !returnAlgoCount)
        return CUBLAS_STATUS_INVALID_VALUE;
    // One algorithm that needs no workspace fits every preference.
    cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
    std::memset(&r, 0, sizeof r);
    init_algo(&r.algo);
    r.workspaceSize = 0;
    r.state = CUBLAS_STATUS_SUCCESS;
    r.wavesCount = 1.0f;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoInit(cublasLtHandle_t lightHandle,
                                                   cublasComputeType_t, cudaDataType_t,
                                                   cudaDataType_t, cudaDataType_t,
                                                   cudaDataType_t, cudaDataType_t, int algoId,
                                                   cublasLtMatmulAlgo_t *algo)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!algo || algoId != 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    init_algo(algo);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoCheck(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    const cublasLtMatmulAlgo_t *algo, cublasLtMatmulHeuristicResult_t *result)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!operationDesc || !Adesc || !Bdesc || !Cdesc || !Ddesc || !algo || !result)
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulAlgo_t copy = *algo;  // algo may point into result
    std::memset(result, 0, sizeof *result);
    result->algo = copy;
    result->state = CUBLAS_STATUS_SUCCESS;
    result->wavesCount = 1.0f;
    return CUBLAS_STATUS_SUCCESS;
}

// Configuration values live in the algo's own words, one per attribute id
// (the simulated algorithm has fewer than eight settable values).
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigSetAttribute(
    cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, const void *buf,
    size_t sizeInBytes)
{
    if (!algo || !buf || sizeInBytes > sizeof(uint64_t) || attr < 0 || attr >= 8)
        return CUBLAS_STATUS_INVALID_VALUE;
    algo->data[attr] = 0;
    std::memcpy(&algo->data[attr], buf, sizeInBytes);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoConfigGetAttribute(
    const cublasLtMatmulAlgo_t *algo, cublasLtMatmulAlgoConfigAttributes_t attr, void *buf,
    size_t sizeInBytes, size_t *sizeWritten)
{
    if (!algo || attr < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (sizeInBytes == 0) {
        if (!sizeWritten)
            return CUBLAS_STATUS_INVALID_VALUE;
        *sizeWritten = sizeof(uint64_t);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    std::memset(buf, 0, sizeInBytes);
    if (attr < 8)
        std::memcpy(buf, &algo->data[attr], std::min(sizeInBytes, sizeof(uint64_t)));
    if (sizeWritten)
        *sizeWritten = sizeInBytes;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t CUBLASWINAPI cublasLtMatmul(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
    const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
    const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
    cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t)
{
    if (!lightHandle)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!computeDesc || !alpha || !beta || !Adesc || !Bdesc || !Cdesc || !Ddesc || !A || !B ||
        !C || !D)
        return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
