// init_only: a program that initialises CUDA through the runtime (device
// count, device properties, a synchronise) but never allocates. torchseal
// still writes its (empty) report and says at info level that it is active,
// so a CI script can tell "active, no leaks" from "never active".
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: active-line
// ENV: TORCHSEAL_LOG=info

#include "common.h"

int main() {
  int count = 0;
  CHECK_OTHER(cudaGetDeviceCount(&count));
  cudaDeviceProp prop;
  CHECK_OTHER(cudaGetDeviceProperties(&prop, 0));
  CHECK_OTHER(cudaDeviceSynchronize());
  std::printf("devices=%d\n", count);
  return 0;
}
