// invalid_free: frees a device pointer twice, frees a pointer CUDA never
// returned, and passes an ordinary malloc() pointer to cudaFreeHost. Each is
// an invalid-free event; torchseal forwards the call unchanged (CUDA returns
// an error) and the program carries on and exits 0. Prints each bad address
// as `invalid=0x...` and `calls=N`.
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 3
// EXPECT: invalid_free site=double api=cudaFree
// EXPECT: invalid_free site=bogus api=cudaFree
// EXPECT: invalid_free site=host api=cudaFreeHost
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

#include <cstdint>
#include <cstdlib>

namespace {
void expect_failure(cudaError_t err, const char *what) {
  example::calls.fetch_add(1);
  if (err == cudaSuccess) {
    std::fprintf(stderr, "invalid_free: %s unexpectedly succeeded\n", what);
    std::exit(1);
  }
  (void)cudaGetLastError();
}
}  // namespace

__attribute__((noinline)) void double_free() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, 4096));
  CHECK(cudaFree(p));
  std::printf("invalid=%p\n", p);
  expect_failure(cudaFree(p), "second cudaFree");  // SITE: double
}

__attribute__((noinline)) void bogus_free() {
  void *bogus = reinterpret_cast<void *>(uintptr_t{0xdead0000});
  std::printf("invalid=%p\n", bogus);
  expect_failure(cudaFree(bogus), "cudaFree(bogus)");  // SITE: bogus
}

__attribute__((noinline)) void host_free_of_malloc() {
  // Deliberately never released: CUDA may or may not have touched it.
  void *plain = std::malloc(64);
  std::printf("invalid=%p\n", plain);
  expect_failure(cudaFreeHost(plain), "cudaFreeHost(malloc pointer)");  // SITE: host
}

int main() {
  double_free();
  bogus_free();
  host_free_of_malloc();
  // CUDA still works afterwards.
  void *p = nullptr;
  CHECK(cudaMalloc(&p, 4096));
  CHECK(cudaFree(p));
  std::printf("invalid_free: survived\n");
  example::print_calls();
  return 0;
}
