// Stream-ordered allocation and pool accounting through the driver.
#include "test_support.h"

namespace {
cuuint64_t attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    REQUIRE(cuMemPoolGetAttribute(pool, a, &v) == CUDA_SUCCESS);
    return v;
}
}  // namespace

TEST_CASE("pool accounting is exact", "[pool]")
{
    sim_primary_context();
    CUmemoryPool pool;
    REQUIRE(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS);
    CUstream s;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUdeviceptr a, b;
    REQUIRE(cuMemAllocAsync(&a, 1000, s) == CUDA_SUCCESS);
    REQUIRE(cuMemAllocAsync(&b, 3 * kMiB, s) == CUDA_SUCCESS);
    CHECK(a != b);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1024 + 3 * kMiB);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB + 4 * kMiB);
    REQUIRE(cuMemFreeAsync(b, s) == CUDA_SUCCESS);
    CHECK(cuMemFreeAsync(b, s) == CUDA_ERROR_INVALID_VALUE);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 1024);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 1024 + 3 * kMiB);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 6 * kMiB);  // cached until sync
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);  // threshold 0: release
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 6 * kMiB);

    cuuint64_t keep = ~cuuint64_t(0);
    REQUIRE(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS);
    REQUIRE(cuMemFreeAsync(a, s) == CUDA_SUCCESS);
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB);  // kept
    REQUIRE(cuMemAllocAsync(&a, 512, s) == CUDA_SUCCESS);                // reused chunk
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * kMiB);
    REQUIRE(cuMemFreeAsync(a, s) == CUDA_SUCCESS);
    REQUIRE(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 0);
    cuuint64_t zero = 0;
    REQUIRE(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero) == CUDA_SUCCESS);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 0);
    REQUIRE(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero) == CUDA_SUCCESS);
}

TEST_CASE("explicit pools and OOM", "[pool]")
{
    sim_primary_context();
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    REQUIRE(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    CUdeviceptr p;
    REQUIRE(cuMemAllocFromPoolAsync(&p, 5 * kMiB, pool, nullptr) == CUDA_SUCCESS);
    CHECK(attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 5 * kMiB);
    CHECK(cuMemAllocFromPoolAsync(&p, kPiB, pool, nullptr) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAllocAsync(&p, kPiB, nullptr) == CUDA_ERROR_OUT_OF_MEMORY);
    CUmemoryPool def;
    cuDeviceGetDefaultMemPool(&def, 0);
    CHECK(cuMemPoolDestroy(def) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS);
}
