// cuGetProcAddress: ABI variant by version, per-thread twins, symbolStatus.
#include <dlfcn.h>

#include "test_support.h"

namespace {
void *symbol(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(h);
    return dlsym(h, name);
}

void *query(const char *name, int version, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    void *fn = reinterpret_cast<void *>(0x1);
    cuGetProcAddress_v2(name, &fn, version, flags, st);
    return fn;
}
}  // namespace

TEST_CASE("versions select the ABI variant", "[procaddress]")
{
    CUdriverProcAddressQueryResult st;
    CHECK(query("cuMemAlloc", 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == symbol("cuMemAlloc_v2"));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    CHECK(query("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_DEFAULT, &st) == symbol("cuMemAlloc_v2"));
    CHECK(query("cuMemAlloc", 3010, CU_GET_PROC_ADDRESS_DEFAULT, &st) == symbol("cuMemAlloc"));
    CHECK(query("cuCtxCreate", 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == symbol("cuCtxCreate_v4"));
    CHECK(query("cuCtxCreate", 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == symbol("cuCtxCreate_v3"));
    CHECK(query("cuGetProcAddress", 13000, 0, &st) == symbol("cuGetProcAddress_v2"));
    CHECK(query("cuCtxDestroy", 13000, 0, &st) == symbol("cuCtxDestroy_v2"));
    CHECK(query("cuMemCreate", 13000, 0, &st) == symbol("cuMemCreate"));
    // 13.0 adds cuCtxSynchronize_v2(CUcontext) but cuda.h keeps the old
    // signature as the default, so the base name keeps resolving to it.
    CHECK(query("cuCtxSynchronize", 13000, 0, &st) == symbol("cuCtxSynchronize"));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
}

TEST_CASE("per-thread flag selects _ptsz/_ptds twins", "[procaddress]")
{
    CUdriverProcAddressQueryResult st;
    const cuuint64_t pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    CHECK(query("cuMemAllocAsync", 13000, pt, &st) == symbol("cuMemAllocAsync_ptsz"));
    CHECK(query("cuMemAllocAsync", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st) ==
          symbol("cuMemAllocAsync"));
    CHECK(query("cuMemFreeAsync", 13000, pt, &st) == symbol("cuMemFreeAsync_ptsz"));
    CHECK(query("cuMemcpyHtoD", 13000, pt, &st) == symbol("cuMemcpyHtoD_v2_ptds"));
    CHECK(query("cuMemAlloc", 13000, pt, &st) == symbol("cuMemAlloc_v2"));  // no twin
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
}

TEST_CASE("symbolStatus reports missing and too-new symbols", "[procaddress]")
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    void *fn = reinterpret_cast<void *>(1);
    CHECK(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND);
    CHECK(fn == nullptr);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(cuGetProcAddress_v2("cuMemCreate", &fn, 10000, 0, &st) == CUDA_ERROR_NOT_FOUND);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CHECK(cuGetProcAddress_v2(nullptr, &fn, 13000, 0, &st) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("unsimulated driver functions return NOT_SUPPORTED", "[procaddress]")
{
    auto fn = reinterpret_cast<CUresult (*)(CUgraph *, CUgraph)>(symbol("cuGraphClone"));
    REQUIRE(fn);
    CUgraph g;
    CHECK(fn(&g, nullptr) == CUDA_ERROR_NOT_SUPPORTED);
}
