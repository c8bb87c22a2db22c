// cublas_handle_leak: NVIDIA's simpleCUBLAS with cublasDestroy removed. The
// program's own cuBLAS handle is never destroyed, so its workspaces (64 MiB,
// 128 KiB and 1 KiB of cuMemAlloc_v2 inside libcublas.so.13, 67,240,960 B
// in 3 allocations on an H100, where compute-sanitizer agrees) are a leak:
// no framework owns this handle. `--destroy` is the correct program.
//
// Linked against simcuda's libcublas.so.13; checked by
// tests/integration/cublas_handle.py, not by the EXPECT runner (the leak's
// innermost frames are inside libcublas, not on a line of this file).

#include <cublas_v2.h>

#include <cstring>
#include <vector>

#include "common.h"

namespace {

constexpr int kN = 275;  // simpleCUBLAS's matrix order

__attribute__((noinline)) cublasHandle_t make_handle() {
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {  // LEAK-SITE: handle
    std::fprintf(stderr, "cublasCreate failed\n");
    std::exit(1);
  }
  return handle;
}

}  // namespace

int main(int argc, char **argv) {
  const bool destroy = argc > 1 && std::strcmp(argv[1], "--destroy") == 0;
  const size_t bytes = sizeof(float) * kN * kN;
  std::vector<float> h(kN * kN, 1.0f);
  float *a = nullptr, *b = nullptr, *c = nullptr;
  CHECK_OTHER(cudaMalloc(reinterpret_cast<void **>(&a), bytes));
  CHECK_OTHER(cudaMalloc(reinterpret_cast<void **>(&b), bytes));
  CHECK_OTHER(cudaMalloc(reinterpret_cast<void **>(&c), bytes));
  CHECK_OTHER(cudaMemcpy(a, h.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_OTHER(cudaMemcpy(b, h.data(), bytes, cudaMemcpyHostToDevice));
  cublasHandle_t handle = make_handle();
  const float alpha = 1.0f, beta = 0.0f;
  if (cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN, &alpha, a, kN, b, kN, &beta, c,
                  kN) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasSgemm failed\n");
    return 1;
  }
  CHECK_OTHER(cudaMemcpy(h.data(), c, bytes, cudaMemcpyDeviceToHost));
  CHECK_OTHER(cudaFree(a));
  CHECK_OTHER(cudaFree(b));
  CHECK_OTHER(cudaFree(c));
  if (destroy) cublasDestroy(handle);
  std::printf("cublas_handle_leak: done (%s)\n", destroy ? "handle destroyed" : "handle kept");
  return 0;
}
