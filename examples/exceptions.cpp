// exceptions: C++ exceptions and unwinding must keep working while torchseal
// is loaded (the shim takes backtraces and may install its own unwinder).
// Throws through a frame that called cudaMalloc (an RAII guard frees it during
// unwinding), throws on worker threads, and walks the stack with
// _Unwind_Backtrace. Exits 0 iff every check held; nothing leaks.
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0
// EXPECT: events-from-stdout

#include "common.h"

#include <unwind.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {
int failures = 0;

void expect(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "exceptions: FAILED: %s\n", what);
    ++failures;
  }
}

struct DeviceBuffer {
  void *ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { CHECK(cudaMalloc(&ptr, bytes)); }
  ~DeviceBuffer() { CHECK(cudaFree(ptr)); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
};

__attribute__((noinline)) void allocate_then_throw(int depth) {
  DeviceBuffer buf(4096 * (depth + 1));
  if (depth == 0) throw std::runtime_error("thrown below cudaMalloc");
  allocate_then_throw(depth - 1);
}

__attribute__((noinline)) void raw_alloc_then_throw(void **out) {
  CHECK(cudaMalloc(out, 8192));
  throw 42;
}

_Unwind_Reason_Code count_frame(struct _Unwind_Context *ctx, void *arg) {
  auto *n = static_cast<int *>(arg);
  if (_Unwind_GetIP(ctx) != 0) ++*n;
  return _URC_NO_REASON;
}

__attribute__((noinline)) int unwind_depth(int extra) {
  if (extra > 0) return unwind_depth(extra - 1) + 0;
  int n = 0;
  _Unwind_Backtrace(count_frame, &n);
  return n;
}
}  // namespace

int main() {
  // 1. Throw through five frames that each hold a device buffer.
  bool caught = false;
  try {
    allocate_then_throw(4);
  } catch (const std::runtime_error &e) {
    caught = std::string(e.what()) == "thrown below cudaMalloc";
  }
  expect(caught, "runtime_error through cudaMalloc frames");

  // 2. Throw right after a raw cudaMalloc; the catcher frees it.
  void *raw = nullptr;
  int value = 0;
  try {
    raw_alloc_then_throw(&raw);
  } catch (int v) {
    value = v;
  }
  expect(value == 42 && raw != nullptr, "int thrown after cudaMalloc");
  if (raw) CHECK(cudaFree(raw));

  // 3. _Unwind_Backtrace sees the frames we know are there.
  int shallow = unwind_depth(0);
  int deep = unwind_depth(10);
  expect(shallow >= 2, "_Unwind_Backtrace walks at least main + caller");
  expect(deep >= shallow + 10, "_Unwind_Backtrace sees 10 extra frames");

  // 4. The same on four threads at once, while CUDA calls happen.
  std::atomic<int> thread_ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&thread_ok] {
      for (int i = 0; i < 50; ++i) {
        try {
          allocate_then_throw(2);
        } catch (const std::exception &) {
          if (i == 49) thread_ok.fetch_add(1);
        }
      }
    });
  }
  for (auto &t : threads) t.join();
  expect(thread_ok.load() == 4, "exceptions on worker threads");

  std::printf("exceptions: %s (frames: %d/%d)\n", failures ? "FAILED" : "ok", shallow, deep);
  example::print_calls();
  return failures == 0 ? 0 : 1;
}
