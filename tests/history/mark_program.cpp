// mark_program: calls torchseal_mark() before any CUDA call (must be a
// no-op), then from the main thread and from a second thread around a few
// allocations. The shim's symbol is looked up at run time, so the program
// also runs without the shim (then it marks nothing).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <torchseal.h>

#include <cstdio>
#include <thread>

namespace {

void mark(const char *label) {
  // Typed from the public header, so a change of signature breaks this build.
  static auto fn = reinterpret_cast<decltype(&torchseal_mark)>(dlsym(RTLD_DEFAULT, "torchseal_mark"));
  if (fn) fn(label);
}

bool ok(cudaError_t e, const char *what) {
  if (e != cudaSuccess) std::fprintf(stderr, "mark_program: %s failed (%d)\n", what, static_cast<int>(e));
  return e == cudaSuccess;
}

}  // namespace

int main() {
  mark("c: before any CUDA call");
  void *a = nullptr, *b = nullptr;
  if (!ok(cudaMalloc(&a, 1 << 20), "cudaMalloc")) return 1;
  mark("c: epoch 1");
  std::thread t([] {
    void *p = nullptr;
    if (ok(cudaMalloc(&p, 4096), "cudaMalloc")) {
      mark("c: from a worker thread");
      ok(cudaFree(p), "cudaFree");
    }
  });
  t.join();
  mark(nullptr);  // ignored, never a crash
  mark("c: epoch 1");  // a label used twice is stored once, marked twice
  if (!ok(cudaMalloc(&b, 2048), "cudaMalloc")) return 1;
  ok(cudaFree(a), "cudaFree");
  ok(cudaFree(b), "cudaFree");
  return 0;
}
