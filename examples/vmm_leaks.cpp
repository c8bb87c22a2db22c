// vmm_leaks: the driver's virtual memory management API, the way PyTorch's
// expandable segments use it. The leak unit is the physical allocation
// handle: one cuMemCreate is never released (a leak); another is released
// while still mapped, which is not a leak (the driver keeps it alive until
// the last unmap); a third is created and released plainly.
//
// EXPECT: leaks 1
// EXPECT: leak site=vmm kind=vmm api=cuMemCreate bytes=2097152 allocations=1 function=leak_physical_handle
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0

#include "common_driver.h"

static CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

__attribute__((noinline)) void leak_physical_handle(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));  // LEAK-SITE: vmm
  (void)handle;  // never released
}

__attribute__((noinline)) void release_while_mapped(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));
  CUdeviceptr va = 0;
  DRV(cuMemAddressReserve(&va, size, 0, 0, 0));
  DRV(cuMemMap(va, size, 0, handle, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DRV(cuMemSetAccess(va, size, &access, 1));
  DRV(cuMemRelease(handle));  // still mapped: the mapping keeps it alive
  DRV(cuMemUnmap(va, size));  // now the physical memory goes
  DRV(cuMemAddressFree(va, size));
}

__attribute__((noinline)) void create_and_release(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));
  DRV(cuMemRelease(handle));
}

int main() {
  DRV(cuInit(0));
  CUdevice dev;
  DRV(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  DRV(cuDevicePrimaryCtxRetain(&ctx, dev));
  DRV(cuCtxSetCurrent(ctx));
  CUmemAllocationProp prop = device_prop(dev);
  size_t granularity = 0;
  DRV(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t size = 2u << 20;
  if (granularity > size) size = granularity;
  leak_physical_handle(dev, size);
  release_while_mapped(dev, size);
  create_and_release(dev, size);
  std::printf("vmm_leaks: done\n");
  return 0;
}
