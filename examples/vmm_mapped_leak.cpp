// vmm_mapped_leak: physical memory lives while its handle is unreleased or
// any mapping of it remains. Like NVIDIA's vectorAddMMAP, both buffers are
// created, mapped and released at once; the first is unmapped and its
// address range freed later (correct), the second stays mapped to the end:
// it leaks, at its cuMemCreate line, and the report names the cuMemMap
// that still holds it.
//
// EXPECT: leaks 1
// EXPECT: leak site=mapped kind=vmm api=cuMemCreate bytes=2097152 allocations=1 function=map_and_release
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0

#include "common_driver.h"

namespace {

struct Mapping {
  CUdeviceptr va = 0;
  size_t size = 0;
};

CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

// Create, reserve, map, allow access, release the handle at once: the
// mapping keeps the memory alive.
__attribute__((noinline)) Mapping map_and_release(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));  // LEAK-SITE: mapped
  Mapping m;
  m.size = size;
  DRV(cuMemAddressReserve(&m.va, size, 0, 0, 0));
  DRV(cuMemMap(m.va, size, 0, handle, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DRV(cuMemSetAccess(m.va, size, &access, 1));
  DRV(cuMemRelease(handle));
  return m;
}

__attribute__((noinline)) void unmap_and_free(const Mapping &m) {
  DRV(cuMemUnmap(m.va, m.size));
  DRV(cuMemAddressFree(m.va, m.size));
}

}  // namespace

int main() {
  DRV(cuInit(0));
  CUdevice dev;
  DRV(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
  DRV(cuCtxSetCurrent(ctx));
  CUmemAllocationProp prop = device_prop(dev);
  size_t size = 0;
  DRV(cuMemGetAllocationGranularity(&size, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  Mapping freed = map_and_release(dev, size);
  Mapping kept = map_and_release(dev, size);
  unmap_and_free(freed);
  std::printf("vmm_mapped_leak: done, %zu bytes still mapped at %llx\n", kept.size,
              static_cast<unsigned long long>(kept.va));
  return 0;
}
