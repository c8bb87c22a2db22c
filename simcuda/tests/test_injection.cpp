// CUDA_INJECTION64_PATH is honoured once, at the first cuInit.
#include <dlfcn.h>

#include "test_support.h"

TEST_CASE("cuInit loads CUDA_INJECTION64_PATH and calls InitializeInjection once", "[.injection]")
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    auto *calls = static_cast<int *>(dlsym(RTLD_DEFAULT, "simcuda_test_injection_calls"));
    REQUIRE(calls != nullptr);
    CHECK(*calls == 1);
}
