// vmm_leaks: the driver's virtual memory management API, the way PyTorch's
// expandable segments use it. The leak unit is the physical allocation
// handle: one cuMemCreate is never released (a leak); another is released
// while still mapped, which is not a leak (the driver keeps it alive until
// the last unmap); a third is created and released plainly.
// A handle also has references taken from a mapped address
// (cuMemRetainAllocationHandle), each balanced by a release: NCCL frees its
// buffers by retain, release, unmap, release (no leak, no invalid free); a
// probe that retains and releases a handle its owner never frees leaves
// that leak in place; a retain of a handle released while mapped makes it
// the program's again, so its unmap frees nothing until the last release.
//
// EXPECT: leaks 2
// EXPECT: leak site=vmm kind=vmm api=cuMemCreate bytes=2097152 allocations=1 function=leak_physical_handle
// EXPECT: leak site=probed kind=vmm api=cuMemCreate bytes=2097152 allocations=1 function=probed_and_kept
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

struct Mapped {
  CUmemGenericAllocationHandle handle;
  CUdeviceptr va;
};

Mapped create_and_map(CUdevice dev, size_t size, CUmemGenericAllocationHandle *handle) {
  CUmemAllocationProp prop = device_prop(dev);
  Mapped m{*handle, 0};
  DRV(cuMemAddressReserve(&m.va, size, 0, 0, 0));
  DRV(cuMemMap(m.va, size, 0, m.handle, 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  DRV(cuMemSetAccess(m.va, size, &access, 1));
  return m;
}

// NCCL's free of a cuMem buffer: the handle from the address, then two
// releases around the unmap.
__attribute__((noinline)) void nccl_style_free(CUdeviceptr va, size_t size) {
  CUmemGenericAllocationHandle handle;
  DRV(cuMemRetainAllocationHandle(&handle, reinterpret_cast<void *>(va)));
  DRV(cuMemRelease(handle));
  DRV(cuMemUnmap(va, size));
  DRV(cuMemRelease(handle));
  DRV(cuMemAddressFree(va, size));
}

__attribute__((noinline)) void nccl_style_buffer(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));
  Mapped m = create_and_map(dev, size, &handle);
  nccl_style_free(m.va, size);
}

// Is this address cuMem memory? A retain and a release say so.
__attribute__((noinline)) bool is_cumem(CUdeviceptr va) {
  CUmemGenericAllocationHandle handle;
  if (cuMemRetainAllocationHandle(&handle, reinterpret_cast<void *>(va)) != CUDA_SUCCESS)
    return false;
  DRV(cuMemRelease(handle));
  return true;
}

__attribute__((noinline)) void probed_and_kept(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));  // LEAK-SITE: probed
  Mapped m = create_and_map(dev, size, &handle);
  if (!is_cumem(m.va)) std::abort();
  // Never unmapped nor released: the probe's release was not the owner's.
}

__attribute__((noinline)) void retained_after_release(CUdevice dev, size_t size) {
  CUmemAllocationProp prop = device_prop(dev);
  CUmemGenericAllocationHandle handle;
  DRV(cuMemCreate(&handle, size, &prop, 0));
  Mapped m = create_and_map(dev, size, &handle);
  DRV(cuMemRelease(handle));  // the mapping keeps it
  CUmemGenericAllocationHandle again;
  DRV(cuMemRetainAllocationHandle(&again, reinterpret_cast<void *>(m.va)));
  DRV(cuMemUnmap(m.va, size));  // the retained reference keeps it
  DRV(cuMemAddressFree(m.va, size));
  DRV(cuMemRelease(again));  // now it goes
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
  nccl_style_buffer(dev, size);
  probed_and_kept(dev, size);
  retained_after_release(dev, size);
  std::printf("vmm_leaks: done\n");
  return 0;
}
