// Registered and mapped host memory, managed-memory hints, and the device
// attribute table.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>

#include "test_support.h"

TEST_CASE("host registration follows the documented rules", "[driver]")
{
    sim_primary_context();
    const size_t n = 64 * 1024;
    char *p = static_cast<char *>(std::aligned_alloc(4096, n));
    REQUIRE(cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS);
    CHECK(cuMemHostRegister(p + 4096, 4096, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CUdeviceptr mapped = 0;
    REQUIRE(cuMemHostGetDevicePointer(&mapped, p + 100, 0) == CUDA_SUCCESS);
    CHECK(mapped == CUdeviceptr(p + 100));  // unified addressing
    unsigned type = 0;
    REQUIRE(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(p)) ==
            CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_HOST);
    // Copies read and write the caller's own bytes.
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, 16) == CUDA_SUCCESS);
    std::memset(p, 0x3c, 16);
    REQUIRE(cuMemcpyHtoD(d, p, 16) == CUDA_SUCCESS);
    char back[16] = {};
    REQUIRE(cuMemcpyDtoH(back, d, 16) == CUDA_SUCCESS);
    CHECK(back[15] == 0x3c);
    cuMemFree(d);

    CHECK(cuMemHostUnregister(p + 4096) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);  // not the base
    CHECK(cuMemHostUnregister(p) == CUDA_SUCCESS);
    CHECK(cuMemHostUnregister(p) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK(cuMemHostGetDevicePointer(&mapped, p, 0) == CUDA_ERROR_INVALID_VALUE);

    CHECK(cuMemHostRegister(p, n, 0x80) == CUDA_ERROR_INVALID_VALUE);  // unknown flag
    CHECK(cuMemHostRegister(p, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemHostRegister(nullptr, n, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_IOMEMORY) == CUDA_ERROR_NOT_SUPPORTED);
    REQUIRE(cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_READ_ONLY) == CUDA_SUCCESS);
    CHECK(cuMemHostUnregister(p) == CUDA_SUCCESS);
    std::free(p);

    // Device memory and pinned allocations are not the caller's to register.
    REQUIRE(cuMemAlloc(&d, 4096) == CUDA_SUCCESS);
    CHECK(cuMemHostRegister(reinterpret_cast<void *>(d), 4096, 0) == CUDA_ERROR_INVALID_VALUE);
    cuMemFree(d);
    void *pinned;
    REQUIRE(cuMemHostAlloc(&pinned, 8192, 0) == CUDA_SUCCESS);
    CHECK(cuMemHostRegister(pinned, 8192, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    cuMemFreeHost(pinned);
}

TEST_CASE("destroying a context drops its registrations", "[teardown]")
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx;
    REQUIRE(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
    void *p = std::aligned_alloc(4096, 8192);
    REQUIRE(cuMemHostRegister(p, 8192, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxDestroy(ctx) == CUDA_SUCCESS);
    sim_primary_context();
    CHECK(cuMemHostUnregister(p) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    REQUIRE(cuMemHostRegister(p, 8192, 0) == CUDA_SUCCESS);
    CHECK(cuMemHostUnregister(p) == CUDA_SUCCESS);
    std::free(p);
}

TEST_CASE("runtime registration, mapped memory and prefetch", "[runtime]")
{
    const size_t n = 32 * 1024;
    void *p = std::aligned_alloc(4096, n);
    REQUIRE(cudaHostRegister(p, n, cudaHostRegisterMapped) == cudaSuccess);
    void *d = nullptr;
    REQUIRE(cudaHostGetDevicePointer(&d, p, 0) == cudaSuccess);
    CHECK(d == p);
    CHECK(cudaHostGetDevicePointer(&d, p, 1) == cudaErrorInvalidValue);
    CHECK(cudaHostRegister(p, n, 0) == cudaErrorHostMemoryAlreadyRegistered);
    CHECK(cudaHostUnregister(p) == cudaSuccess);
    CHECK(cudaHostUnregister(p) == cudaErrorHostMemoryNotRegistered);
    cudaGetLastError();
    std::free(p);

    void *h = nullptr;
    REQUIRE(cudaHostAlloc(&h, 4096, cudaHostAllocMapped) == cudaSuccess);
    REQUIRE(cudaHostGetDevicePointer(&d, h, 0) == cudaSuccess);
    CHECK(d == h);
    cudaFreeHost(h);

    void *m = nullptr;
    REQUIRE(cudaMallocManaged(&m, 1 << 20, cudaMemAttachGlobal) == cudaSuccess);
    cudaMemLocation dev0 = {cudaMemLocationTypeDevice, 0};
    cudaMemLocation host = {cudaMemLocationTypeHost, 0};
    cudaMemLocation dev9 = {cudaMemLocationTypeDevice, 9};
    CHECK(cudaMemPrefetchAsync(m, 1 << 20, dev0, 0, nullptr) == cudaSuccess);
    CHECK(cudaMemPrefetchAsync(m, 4096, host, 0, nullptr) == cudaSuccess);
    CHECK(cudaMemPrefetchAsync(m, 1 << 20, dev0, 1, nullptr) == cudaErrorInvalidValue);  // flags
    CHECK(cudaMemPrefetchAsync(m, 2 << 20, dev0, 0, nullptr) == cudaErrorInvalidValue);  // past the end
    CHECK(cudaMemPrefetchAsync(m, 4096, dev9, 0, nullptr) == cudaErrorInvalidDevice);
    CHECK(cudaMemAdvise(m, 4096, cudaMemAdviseSetReadMostly, dev9) == cudaSuccess);  // ignored
    CHECK(cudaMemAdvise(m, 4096, cudaMemAdviseSetPreferredLocation, dev0) == cudaSuccess);
    CHECK(cudaMemAdvise(m, 4096, cudaMemAdviseSetAccessedBy, dev9) == cudaErrorInvalidDevice);
    CHECK(cudaMemAdvise(m, 4096, cudaMemoryAdvise(99), dev0) == cudaErrorInvalidValue);
    void *plain = nullptr;
    REQUIRE(cudaMalloc(&plain, 4096) == cudaSuccess);
    CHECK(cudaMemPrefetchAsync(plain, 4096, dev0, 0, nullptr) == cudaErrorInvalidValue);  // not managed
    CHECK(cudaMemAdvise(plain, 4096, cudaMemAdviseSetReadMostly, dev0) == cudaErrorInvalidValue);
    cudaGetLastError();
    cudaFree(plain);
    cudaFree(m);
}

TEST_CASE("every device attribute is answered, properties agree", "[runtime]")
{
    int v = -7;
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; ++a) {
        INFO("attribute " << a);
        REQUIRE(cudaDeviceGetAttribute(&v, cudaDeviceAttr(a), 0) == cudaSuccess);
    }
    CHECK(cudaDeviceGetAttribute(&v, cudaDeviceAttr(CU_DEVICE_ATTRIBUTE_MAX), 0) ==
          cudaErrorInvalidValue);
    cudaGetLastError();
    auto compression = cudaDeviceAttr(CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED);
    REQUIRE(cudaDeviceGetAttribute(&v, compression, 0) == cudaSuccess);
    CHECK(v == 1);  // generic compression, which a sample checked for
    cudaDeviceProp prop;
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxTexture2DLinearPitch, 0) == cudaSuccess);
    CHECK(prop.maxTexture2DLinear[2] == v);
    REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSurfaceCubemapLayeredLayers, 0) == cudaSuccess);
    CHECK(prop.maxSurfaceCubemapLayered[1] == v);
    REQUIRE(cudaDeviceGetAttribute(&v, cudaDevAttrHostRegisterReadOnlySupported, 0) == cudaSuccess);
    CHECK(prop.hostRegisterReadOnlySupported == v);
    CHECK(prop.gpuPciDeviceID == 0x233010deu);
    CHECK(prop.major == 9);
    CHECK(prop.maxThreadsPerBlock == 1024);
}
