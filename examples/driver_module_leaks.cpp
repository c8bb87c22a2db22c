// driver_module_leaks: a driver-API program shaped like NVIDIA's vectorAddDrv
// sample. It loads a module from embedded PTX with JIT log options, takes
// its kernels and a __device__ counter, allocates with cuMemAlloc, copies,
// launches and frees, then unloads the module and destroys its context.
// Planted: the output buffer is never freed, a scratch buffer leaks on each
// of three passes, and a staging range registered with cuMemHostRegister is
// never unregistered. The context's destruction is where they are found.
//
// EXPECT: leaks 3
// EXPECT: leak site=output kind=device api=cuMemAlloc_v2 bytes=4096 allocations=1 function=alloc_output detected_at=context-teardown
// EXPECT: leak site=scratch kind=device api=cuMemAlloc_v2 bytes=24576 allocations=3 function=scratch_pass detected_at=context-teardown
// EXPECT: leak site=registered kind=host-registered api=cuMemHostRegister_v2 bytes=65536 allocations=1 function=register_staging detected_at=context-teardown
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0

#include <cstdint>
#include <vector>

#include "common_driver.h"
#include "kernels/vec_kernels_ptx.h"

static CUmodule load_module() {
  char info[1024] = {}, error[1024] = {};
  CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER};
  void *values[] = {reinterpret_cast<void *>(uintptr_t(sizeof info)), info,
                    reinterpret_cast<void *>(uintptr_t(sizeof error)), error};
  CUmodule module;
  CUresult rc = cuModuleLoadDataEx(&module, kVecKernelsPtx, 4, options, values);
  if (rc != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuModuleLoadDataEx failed (%d): %s\n", int(rc), error);
    std::exit(1);
  }
  return module;
}

__attribute__((noinline)) CUdeviceptr alloc_input(const std::vector<float> &host) {
  CUdeviceptr d;
  DRV(cuMemAlloc(&d, host.size() * sizeof(float)));
  DRV(cuMemcpyHtoD(d, host.data(), host.size() * sizeof(float)));
  return d;
}

__attribute__((noinline)) CUdeviceptr alloc_output(size_t bytes) {
  CUdeviceptr d;
  DRV(cuMemAlloc(&d, bytes));  // LEAK-SITE: output
  return d;
}

static void launch(CUfunction f, int n, void **args) {
  unsigned threads = 256, blocks = (unsigned(n) + threads - 1) / threads;
  DRV(cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, nullptr, args, nullptr));
}

// Scales a scratch copy of x; forgets to free the scratch buffer.
__attribute__((noinline)) void scratch_pass(CUfunction scale, CUdeviceptr x, int n) {
  CUdeviceptr scratch;
  size_t bytes = 2 * n * sizeof(float);
  DRV(cuMemAlloc(&scratch, bytes));  // LEAK-SITE: scratch
  DRV(cuMemcpyDtoD(scratch, x, n * sizeof(float)));
  float factor = 2.0f;
  void *args[] = {&scratch, &factor, &n};
  launch(scale, n, args);
}

// A host staging range pinned for fast copies and never unpinned.
__attribute__((noinline)) void *register_staging(size_t bytes) {
  void *p = std::aligned_alloc(4096, bytes);
  DRV(cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_DEVICEMAP));  // LEAK-SITE: registered
  return p;
}

// Registered, mapped, used and unregistered: not a leak.
static void registered_round_trip(CUdeviceptr d, size_t bytes) {
  void *p = std::aligned_alloc(4096, bytes);
  DRV(cuMemHostRegister(p, bytes, CU_MEMHOSTREGISTER_DEVICEMAP));
  CUdeviceptr mapped;
  DRV(cuMemHostGetDevicePointer(&mapped, p, 0));
  DRV(cuMemcpyDtoH(p, d, bytes));
  DRV(cuMemHostUnregister(p));
  std::free(p);
}

int main() {
  DRV(cuInit(0));
  CUdevice dev;
  DRV(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  DRV(cuCtxCreate(&ctx, nullptr, 0, dev));
  CUmodule module = load_module();
  CUfunction vec_add, scale;
  DRV(cuModuleGetFunction(&vec_add, module, "vec_add"));
  DRV(cuModuleGetFunction(&scale, module, "scale"));
  CUdeviceptr counter;
  size_t counter_bytes;
  DRV(cuModuleGetGlobal(&counter, &counter_bytes, module, "launch_count"));

  int n = 1024;
  size_t bytes = n * sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n);
  CUdeviceptr da = alloc_input(a), db = alloc_input(b), dc = alloc_output(bytes);
  void *args[] = {&da, &db, &dc, &n};
  launch(vec_add, n, args);
  DRV(cuCtxSynchronize());
  DRV(cuMemcpyDtoH(c.data(), dc, bytes));
  unsigned launches = 0;
  DRV(cuMemcpyDtoH(&launches, counter, counter_bytes));
  for (int pass = 0; pass < 3; ++pass) scratch_pass(scale, da, n);
  register_staging(64 << 10);
  registered_round_trip(db, bytes);

  DRV(cuMemFree(da));
  DRV(cuMemFree(db));
  DRV(cuModuleUnload(module));
  DRV(cuCtxDestroy(ctx));
  std::printf("driver_module_leaks: done (counter %u, %zu bytes)\n", launches, counter_bytes);
  return 0;
}
