// entry_point_leak: a runtime program that fetches the driver's cuMemAlloc
// through cudaGetDriverEntryPointByVersion (as PyTorch does for its VMM
// calls) and leaks 1 MiB through that pointer. The hook on the driver's
// cuGetProcAddress hands out torchseal's wrapper, so the leak is seen.
//
// EXPECT: leaks 1
// EXPECT: leak site=entry kind=device api=cuMemAlloc_v2 bytes=1048576 allocations=1 function=leak_through_entry_point
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0

#include <cuda.h>

#include "common.h"

using MemAlloc = CUresult (*)(CUdeviceptr *, size_t);

__attribute__((noinline)) void leak_through_entry_point(MemAlloc alloc) {
  CUdeviceptr p = 0;
  if (alloc(&p, 1u << 20) != CUDA_SUCCESS) std::exit(1);  // LEAK-SITE: entry
}

int main() {
  CHECK_OTHER(cudaFree(nullptr));  // create the context
  void *fn = nullptr;
  cudaDriverEntryPointQueryResult status;
  CHECK_OTHER(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &status));
  if (!fn || status != cudaDriverEntryPointSuccess) {
    std::fprintf(stderr, "entry point not found\n");
    return 1;
  }
  leak_through_entry_point(reinterpret_cast<MemAlloc>(fn));
  std::printf("entry_point_leak: done\n");
  return 0;
}
