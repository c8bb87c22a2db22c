// Names and messages of cuBLAS (and cuBLASLt) status codes.
#pragma once

#include <cublas_api.h>

namespace simmath {

const char *cublas_status_name(cublasStatus_t status);
const char *cublas_status_string(cublasStatus_t status);

}  // namespace simmath
