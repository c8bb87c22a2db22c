// no_leaks (the "clean" example; meson reserves the target name `clean`):
// allocates and frees every allocation family torchseal tracks.
// Nothing leaks, nothing fails; every allocation and free call is counted
// and printed as `calls=N`, which must equal summary.events.
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

int main() {
  cudaStream_t stream = nullptr;
  CHECK_OTHER(cudaStreamCreate(&stream));

  // device
  void *d = nullptr;
  CHECK(cudaMalloc(&d, 1 << 20));
  CHECK(cudaFree(d));

  // pitch
  void *pitched = nullptr;
  size_t pitch = 0;
  CHECK(cudaMallocPitch(&pitched, &pitch, 1000, 64));
  CHECK(cudaFree(pitched));

  // 3D
  cudaPitchedPtr p3 = {};
  const cudaExtent extent = {256, 16, 8};  // width (bytes), height, depth
  CHECK(cudaMalloc3D(&p3, extent));
  CHECK(cudaFree(p3.ptr));

  // stream-ordered, default pool
  void *a = nullptr;
  CHECK(cudaMallocAsync(&a, 1 << 16, stream));
  CHECK(cudaFreeAsync(a, stream));

  // stream-ordered, explicit pool
  cudaMemPoolProps props = {};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaMemPool_t pool = nullptr;
  CHECK_OTHER(cudaMemPoolCreate(&pool, &props));
  void *pa = nullptr;
  CHECK(cudaMallocFromPoolAsync(&pa, 1 << 16, pool, stream));
  CHECK(cudaFreeAsync(pa, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaMemPoolDestroy(pool));

  // managed
  void *m = nullptr;
  CHECK(cudaMallocManaged(&m, 1 << 16, cudaMemAttachGlobal));
  CHECK(cudaFree(m));

  // pinned host
  void *h = nullptr;
  CHECK(cudaMallocHost(&h, 1 << 16));
  CHECK(cudaFreeHost(h));

  void *ha = nullptr;
  CHECK(cudaHostAlloc(&ha, 1 << 16, cudaHostAllocPortable));
  CHECK(cudaFreeHost(ha));

  CHECK_OTHER(cudaStreamDestroy(stream));
  std::printf("no_leaks: done\n");
  example::print_calls();
  return 0;
}
