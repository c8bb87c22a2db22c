// capped_program: a workload for the capped-history tests (capped_e2e.py),
// with what a history cap must keep exact across dropped segments: steps
// (torchseal_step, unless "nosteps"), churn, planted leaks and growth, VMM
// handles and mappings, a context torn down with allocations in it, invalid
// frees, recovered OOMs, and a mark (and every 16th step a dump) each step
// when "marks" is given. The shim's symbols are looked up at run time.
//
//     capped_program STEPS [marks] [nosteps]
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <torchseal.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

template <typename Fn>
Fn shim(const char *name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

void must(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "capped_program: %s failed\n", what);
    std::exit(1);
  }
}

__attribute__((noinline)) void churn(int step) {
  void *p[64];
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 64; ++i)
      must(cudaMalloc(&p[i], 256u << ((i + step) % 8)) == cudaSuccess, "cudaMalloc");
    for (int i = 0; i < 64; ++i) must(cudaFree(p[i]) == cudaSuccess, "cudaFree");
  }
}

__attribute__((noinline)) void *leak_every_step() {
  void *p = nullptr;
  must(cudaMalloc(&p, 4096) == cudaSuccess, "cudaMalloc");
  return p;  // never freed
}

__attribute__((noinline)) void grow(std::vector<void *> &held) {
  void *p = nullptr;
  must(cudaMalloc(&p, 1 << 16) == cudaSuccess, "cudaMalloc");
  held.push_back(p);  // freed at exit: reachable growth, not a leak
}

__attribute__((noinline)) void recovered_oom() {
  void *p = nullptr;
  must(cudaMalloc(&p, size_t{1} << 50) == cudaErrorMemoryAllocation, "an OOM");
  (void)cudaGetLastError();
}

__attribute__((noinline)) void invalid_free() {
  static char not_device[16];
  (void)cudaFree(not_device);
  (void)cudaGetLastError();
}

CUmemAllocationProp vmm_prop() {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

// A mapped handle created, mapped, unmapped and released; every 32nd step
// one handle is created and kept (a VMM leak).
__attribute__((noinline)) void vmm(int step, size_t size) {
  CUmemAllocationProp prop = vmm_prop();
  CUmemGenericAllocationHandle h;
  must(cuMemCreate(&h, size, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
  CUdeviceptr va = 0;
  must(cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS, "cuMemAddressReserve");
  must(cuMemMap(va, size, 0, h, 0) == CUDA_SUCCESS, "cuMemMap");
  must(cuMemUnmap(va, size) == CUDA_SUCCESS, "cuMemUnmap");
  must(cuMemRelease(h) == CUDA_SUCCESS, "cuMemRelease");
  must(cuMemAddressFree(va, size) == CUDA_SUCCESS, "cuMemAddressFree");
  if (step % 32 == 0) {
    CUmemGenericAllocationHandle kept;
    must(cuMemCreate(&kept, size, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
  }
}

// A context of its own, destroyed with an allocation still in it.
__attribute__((noinline)) void context_teardown() {
  CUcontext primary = nullptr, ctx = nullptr;
  must(cuCtxGetCurrent(&primary) == CUDA_SUCCESS, "cuCtxGetCurrent");
  CUdevice dev;
  must(cuDeviceGet(&dev, 0) == CUDA_SUCCESS, "cuDeviceGet");
  must(cuCtxCreate(&ctx, nullptr, 0, dev) == CUDA_SUCCESS, "cuCtxCreate");
  CUdeviceptr p;
  must(cuMemAlloc(&p, 8192) == CUDA_SUCCESS, "cuMemAlloc");
  must(cuCtxDestroy(ctx) == CUDA_SUCCESS, "cuCtxDestroy");
  must(cuCtxSetCurrent(primary) == CUDA_SUCCESS, "cuCtxSetCurrent");
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: capped_program STEPS [marks] [nosteps]\n");
    return 2;
  }
  int steps = std::atoi(argv[1]);
  bool marks = false, explicit_steps = true;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "marks")) marks = true;
    if (!std::strcmp(argv[i], "nosteps")) explicit_steps = false;
  }
  // Typed from the public header, so a change of signature breaks this build.
  auto step_fn = shim<decltype(&torchseal_step)>("torchseal_step");
  auto mark_fn = shim<decltype(&torchseal_mark)>("torchseal_mark");
  auto dump_fn = shim<decltype(&torchseal_dump)>("torchseal_dump");

  must(cudaFree(nullptr) == cudaSuccess, "cudaFree(nullptr)");  // the primary context
  must(cuInit(0) == CUDA_SUCCESS, "cuInit");
  size_t gran = 0;
  CUmemAllocationProp prop = vmm_prop();
  must(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
           CUDA_SUCCESS,
       "cuMemGetAllocationGranularity");
  std::vector<void *> held;
  for (int s = 1; s <= steps; ++s) {
    churn(s);
    if (s % 4 == 0) leak_every_step();
    if (s <= steps / 2) grow(held);
    if (s == 2 || s % 50 == 0) recovered_oom();
    if (s % 40 == 0) invalid_free();
    if (s == steps / 3) context_teardown();
    vmm(s, gran);
    if (marks) {
      char label[32];
      std::snprintf(label, sizeof label, "step %d", s);
      if (mark_fn) mark_fn(label);
      if (dump_fn && s % 16 == 0) dump_fn("capped_program");
    }
    if (explicit_steps && step_fn) step_fn();
    // Time windows are the service thread's steps: a step's pause leaves it
    // the CPU to take them on a loaded machine (where the whole run could
    // otherwise pass before it ran, leaving no window in the history).
    if (!explicit_steps) usleep(500);
  }
  for (void *p : held) must(cudaFree(p) == cudaSuccess, "cudaFree");
  return 0;
}
