// init_only_driver: cuInit and a context, no allocation (driver API, linked
// with -lcuda). The context is left to the driver at exit, as many programs
// do, so no call torchseal records is ever made. As init_only: the report
// is written, empty, and one info line says torchseal is active.
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: active-line
// ENV: TORCHSEAL_LOG=info

#include <cuda.h>

#include <cstdio>

int main() {
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuCtxCreate(&ctx, nullptr, 0, dev) != CUDA_SUCCESS) {
    std::fprintf(stderr, "init_only_driver: a driver call failed\n");
    return 1;
  }
  return 0;
}
