// host_integrity: what the host program relies on keeps working under
// torchseal. Prints one `check NAME ok|FAIL ...` line per item and exits 0
// only if every check passed; the atexit handlers print `atexit_order=...`.
//   rtld_next     a library's own dlsym(RTLD_NEXT, ...) forwarders (puts,
//                 rel_hello) still resolve relative to that library
//   cudnn_lookup  dlsym of an absent cudnnCreate returns NULL with a dlerror()
//   driver_lookup dlsym(libcuda, "cuMemAlloc_v2") returns a callable pointer
//   exceptions    C++ exceptions thrown across CUDA calls are caught normally
//   atexit        handlers run in reverse order of registration; one frees
//                 a live allocation, which is then not a leak
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

extern "C" int rel_hello(void);
extern "C" int rel_base_marker(void);
extern "C" int rel_puts_calls(void);

namespace {
std::atomic<long> calls{0};
int failures = 0;
void *freed_at_exit = nullptr;
char order[8];
int order_n = 0;

void check(const char *name, bool ok, const std::string &detail = "") {
  std::printf("check %s %s%s%s\n", name, ok ? "ok" : "FAIL", detail.empty() ? "" : " ", detail.c_str());
  if (!ok) ++failures;
}

void alloc_or_throw(size_t n) {
  void *p = nullptr;
  calls++;
  if (cudaMalloc(&p, n) != cudaSuccess) throw std::runtime_error("cudaMalloc failed");
  calls++;
  cudaFree(p);
  throw std::runtime_error("thrown after a CUDA call");
}

void at_a() { order[order_n++] = 'A'; }
void at_b() {
  order[order_n++] = 'B';
  calls++;
  cudaFree(freed_at_exit);  // a CUDA call from an atexit handler
}
void at_c() { order[order_n++] = 'C'; }
void at_report() {
  char line[64];
  int n = std::snprintf(line, sizeof line, "atexit_order=%.*s\ncalls=%ld\n", order_n, order,
                        calls.load());
  ssize_t ignored = write(1, line, n);
  (void)ignored;
}
}  // namespace

int main() {
  calls++;
  if (cudaMalloc(&freed_at_exit, 3333) != cudaSuccess) return 2;  // torchseal wakes up
  // Registered after CUDA initialised (as frameworks do), so they run before
  // the CUDA runtime's own teardown and may still call it.
  std::atexit(at_report);  // registered first: runs last
  std::atexit(at_a);
  std::atexit(at_b);
  std::atexit(at_c);

  check("base_loaded", rel_base_marker() == 7, "rel_base_marker()");
  int h = rel_hello();
  check("rtld_next_function", h == 11, "rel_hello()=" + std::to_string(h));
  int before = rel_puts_calls();
  int r = std::puts("puts through the host interposer");
  check("rtld_next_puts", r >= 0 && rel_puts_calls() == before + 1, "puts()=" + std::to_string(r));

  dlerror();
  void *cudnn = dlsym(RTLD_DEFAULT, "cudnnCreate");
  const char *err = dlerror();
  check("cudnn_lookup_default", cudnn == nullptr && err != nullptr);
  dlerror();
  void *cudnn_next = dlsym(RTLD_NEXT, "cudnnCreate");
  err = dlerror();
  check("cudnn_lookup_next", cudnn_next == nullptr && err != nullptr);
  void *self = dlopen(nullptr, RTLD_NOW);
  dlerror();
  void *absent = dlsym(self, "cudnnCreate_v9_does_not_exist");
  check("absent_symbol_handle", absent == nullptr && dlerror() != nullptr);
  void *libc_puts = dlsym(RTLD_NEXT, "getpid");
  check("rtld_next_libc", libc_puts != nullptr &&
                              reinterpret_cast<pid_t (*)()>(libc_puts)() == getpid());

  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!cuda) cuda = dlopen("libcuda.so.1", RTLD_NOW);
  auto alloc = cuda ? reinterpret_cast<CUresult (*)(CUdeviceptr *, size_t)>(
                          dlsym(cuda, "cuMemAlloc_v2"))
                    : nullptr;
  auto free_ = cuda ? reinterpret_cast<CUresult (*)(CUdeviceptr)>(dlsym(cuda, "cuMemFree_v2"))
                    : nullptr;
  bool driver_ok = false;
  if (alloc && free_) {
    CUdeviceptr d = 0;
    calls++;
    if (alloc(&d, 2048) == CUDA_SUCCESS) {
      calls++;
      driver_ok = free_(d) == CUDA_SUCCESS;
    }
  }
  check("driver_lookup", driver_ok);

  int caught = 0;
  for (int i = 0; i < 100; ++i) {
    try {
      alloc_or_throw(512);
    } catch (const std::runtime_error &e) {
      caught += std::strcmp(e.what(), "thrown after a CUDA call") == 0;
    }
  }
  check("exceptions", caught == 100, std::to_string(caught) + "/100 caught");
  std::fflush(stdout);
  return failures ? 1 : 0;
}
