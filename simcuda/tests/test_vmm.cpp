// Virtual memory management semantics.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "test_support.h"

namespace {
CUmemAllocationProp device_prop()
{
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}
size_t used()
{
    size_t free, total;
    REQUIRE(cuMemGetInfo(&free, &total) == CUDA_SUCCESS);
    return total - free;
}
}  // namespace

TEST_CASE("create/map/unmap/release with released-while-mapped semantics", "[vmm]")
{
    sim_primary_context();
    CUmemAllocationProp prop = device_prop();
    size_t gran = 0;
    REQUIRE(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    REQUIRE(gran == 2 * kMiB);
    size_t base_used = used();

    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, gran + 1, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuMemCreate(&h, 2 * gran, &prop, 0) == CUDA_SUCCESS);
    CHECK(used() - base_used == 2 * gran);

    CUdeviceptr va;
    REQUIRE(cuMemAddressReserve(&va, 8 * gran, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(used() - base_used == 2 * gran);  // reserving address space is free
    REQUIRE(cuMemMap(va, 2 * gran, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va + gran, 2 * gran, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // overlap
    REQUIRE(cuMemMap(va + 4 * gran, 2 * gran, 0, h, 0) == CUDA_SUCCESS);       // alias
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    REQUIRE(cuMemSetAccess(va, 2 * gran, &access, 1) == CUDA_SUCCESS);
    CHECK(cuMemSetAccess(va, 4 * gran, &access, 1) == CUDA_ERROR_INVALID_VALUE);  // hole

    const char msg[] = "aliased through one handle";
    REQUIRE(cuMemcpyHtoD(va + 100, msg, sizeof msg) == CUDA_SUCCESS);
    char out[sizeof msg] = {};
    REQUIRE(cuMemcpyDtoH(out, va + 4 * gran + 100, sizeof out) == CUDA_SUCCESS);
    CHECK(std::strcmp(out, msg) == 0);

    CUdeviceptr rbase;
    size_t rsize;
    REQUIRE(cuMemGetAddressRange(&rbase, &rsize, va + 123) == CUDA_SUCCESS);
    CHECK(rbase == va);
    CHECK(rsize == 2 * gran);

    CUmemGenericAllocationHandle retained;
    REQUIRE(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void *>(va + 5)) == CUDA_SUCCESS);
    CHECK(retained == h);
    CUmemAllocationProp got{};
    REQUIRE(cuMemGetAllocationPropertiesFromHandle(&got, h) == CUDA_SUCCESS);
    CHECK(got.location.id == 0);
    REQUIRE(cuMemRelease(retained) == CUDA_SUCCESS);

    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(used() - base_used == 2 * gran);  // still mapped twice
    CHECK(cuMemAddressFree(va, 8 * gran) == CUDA_ERROR_INVALID_VALUE);  // mappings remain
    REQUIRE(cuMemUnmap(va, 2 * gran) == CUDA_SUCCESS);
    CHECK(used() - base_used == 2 * gran);
    REQUIRE(cuMemUnmap(va + 4 * gran, 2 * gran) == CUDA_SUCCESS);
    CHECK(used() == base_used);  // last mapping gone: physical memory freed
    CHECK(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va, 2 * gran) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuMemAddressFree(va, 8 * gran) == CUDA_SUCCESS);
}

TEST_CASE("VMM creation past capacity is OOM; fabric handles are unsupported", "[vmm]")
{
    sim_primary_context();
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, kPiB, &prop, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    CHECK(cuMemCreate(&h, 2 * kMiB, &prop, 0) == CUDA_ERROR_NOT_SUPPORTED);
    CUdeviceptr va;
    size_t free, total;
    cuMemGetInfo(&free, &total);
    // Like PyTorch's expandable segments: reserve more than the device holds.
    REQUIRE(cuMemAddressReserve(&va, (total + total / 8 + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB),
                                0, 0, 0) == CUDA_SUCCESS);
}

TEST_CASE("adjacent mappings are one range for fills, copies and cuMemUnmap; holes are not", "[vmm]")
{
    // PyTorch's expandable segments map one handle per 2 or 20 MiB and fill
    // or copy tensors that cross them, as on a GPU.
    sim_primary_context();
    CUmemAllocationProp prop = device_prop();
    const size_t gran = 2 * kMiB;
    size_t base_used = used();
    CUmemGenericAllocationHandle h[3];
    for (auto &x : h)
        REQUIRE(cuMemCreate(&x, gran, &prop, 0) == CUDA_SUCCESS);
    CUdeviceptr va;
    REQUIRE(cuMemAddressReserve(&va, 8 * gran, 0, 0, 0) == CUDA_SUCCESS);
    REQUIRE(cuMemMap(va, gran, 0, h[0], 0) == CUDA_SUCCESS);
    REQUIRE(cuMemMap(va + gran, gran, 0, h[1], 0) == CUDA_SUCCESS);
    REQUIRE(cuMemMap(va + 3 * gran, gran, 0, h[2], 0) == CUDA_SUCCESS);  // hole before it

    // A fill and copies across the boundary of two mappings.
    REQUIRE(cuMemsetD8(va + 100, 0x5a, 2 * gran - 200) == CUDA_SUCCESS);
    std::vector<unsigned char> out(64);
    REQUIRE(cuMemcpyDtoH(out.data(), va + gran - 32, out.size()) == CUDA_SUCCESS);
    CHECK(out == std::vector<unsigned char>(64, 0x5a));
    const char msg[] = "crosses a mapping boundary";
    REQUIRE(cuMemcpyHtoD(va + gran - 8, msg, sizeof msg) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyDtoD(va + gran + kMiB, va + gran - 8, sizeof msg) == CUDA_SUCCESS);
    char back[sizeof msg] = {};
    REQUIRE(cuMemcpyDtoH(back, va + gran + kMiB, sizeof back) == CUDA_SUCCESS);
    CHECK(std::strcmp(back, msg) == 0);
    // Across the hole, nothing is reachable.
    CHECK(cuMemsetD8(va + gran, 0, 3 * gran) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemcpyHtoD(va + 2 * gran - 8, msg, sizeof msg) == CUDA_ERROR_INVALID_VALUE);

    // cuMemUnmap: whole adjacent mappings, never a hole or a part of one;
    // a refused unmap changes nothing.
    CHECK(cuMemUnmap(va, 4 * gran) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va, gran + kMiB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemUnmap(va + 3 * gran, SIZE_MAX) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuMemcpyDtoH(back, va + gran + kMiB, sizeof back) == CUDA_SUCCESS);
    CHECK(std::strcmp(back, msg) == 0);
    REQUIRE(cuMemUnmap(va, 2 * gran) == CUDA_SUCCESS);
    CHECK(used() - base_used == 3 * gran);  // unmapped but not released
    CHECK(cuMemsetD8(va, 0, 1) == CUDA_ERROR_INVALID_VALUE);
    for (int i = 0; i < 2; ++i)
        REQUIRE(cuMemRelease(h[i]) == CUDA_SUCCESS);
    CHECK(used() - base_used == gran);  // unmapped and released: freed
    REQUIRE(cuMemRelease(h[2]) == CUDA_SUCCESS);
    CHECK(used() - base_used == gran);  // released but mapped: kept
    REQUIRE(cuMemUnmap(va + 3 * gran, gran) == CUDA_SUCCESS);
    CHECK(used() == base_used);
    REQUIRE(cuMemAddressFree(va, 8 * gran) == CUDA_SUCCESS);
}

TEST_CASE("address reservations follow the documented size, alignment and flag rules", "[vmm]")
{
    sim_primary_context();
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    CUdeviceptr va;
    // Size and hint are host-page multiples; the granularity binds mappings only.
    REQUIRE(cuMemAddressReserve(&va, 16 * page, 0, 0, 0) == CUDA_SUCCESS);
    CHECK(va % (2 * kMiB) == 0);
    REQUIRE(cuMemAddressFree(va, 16 * page) == CUDA_SUCCESS);
    CHECK(cuMemAddressReserve(&va, page + 1, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemAddressReserve(&va, 2 * kMiB, 3 * kMiB, 0, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemAddressReserve(&va, 2 * kMiB, 0, 0, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemAddressReserve(&va, 2 * kMiB, 0, page + 1, 0) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuMemAddressReserve(&va, 4 * kMiB, 4 * kMiB, 0, 0) == CUDA_SUCCESS);
    CHECK(va % (4 * kMiB) == 0);
    REQUIRE(cuMemAddressFree(va, 4 * kMiB) == CUDA_SUCCESS);
}
