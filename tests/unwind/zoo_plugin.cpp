// Loaded, used and unloaded repeatedly by unwind_zoo: its code addresses
// come and go, and the frame rules learned for them must go too.
#include <cuda_runtime_api.h>

extern "C" __attribute__((noinline)) int zoo_plugin_alloc(int depth) {
  if (depth > 0) {
    int r = zoo_plugin_alloc(depth - 1);
    asm volatile("" ::: "memory");  // not a tail call
    return r;
  }
  void *p = nullptr;
  if (cudaMalloc(&p, 4096) != cudaSuccess) return 1;
  return cudaFree(p) == cudaSuccess ? 0 : 1;
}
