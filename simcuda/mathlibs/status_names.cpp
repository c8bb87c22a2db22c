#include "status_names.h"

namespace simmath {
namespace {

struct Entry {
    cublasStatus_t status;
    const char *name;
    const char *text;
};

constexpr Entry kEntries[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE", "an invalid numeric value was used as an argument"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH", "an absent device architectural feature is required"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the GPU program failed to execute"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the functionality requested is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "an error was detected when checking the current licensing"},
};

const Entry *find(cublasStatus_t status)
{
    for (const Entry &e : kEntries)
        if (e.status == status)
            return &e;
    return nullptr;
}

}  // namespace

const char *cublas_status_name(cublasStatus_t status)
{
    const Entry *e = find(status);
    return e ? e->name : "CUBLAS_STATUS_UNKNOWN";
}

const char *cublas_status_string(cublasStatus_t status)
{
    const Entry *e = find(status);
    return e ? e->text : "unknown error";
}

}  // namespace simmath
