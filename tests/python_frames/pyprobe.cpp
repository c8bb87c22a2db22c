// libpyprobe.so: the Python-frame capture module on its own, for tests that
// load it with ctypes into each interpreter. CDLL calls run with the GIL
// released, PyDLL calls with it held: both are states the shim sees inside
// an intercepted CUDA call.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "shim/core/python/python_frames.h"

namespace {

std::once_flag g_once;

void ensure_init() {
  std::call_once(g_once, [] {
    const char *v = std::getenv("TORCHSEAL_PYTHON");
    torchseal::py::init(!(v && std::strcmp(v, "off") == 0));
  });
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

// Writes "function\tfile\tline\n" per frame of stack `id`. Returns the number
// of frames, or -1 if buf is too small.
int write_frames(torchseal::PyStackId id, char *buf, int cap) {
  std::vector<std::vector<torchseal::PyFrame>> all;
  torchseal::py::export_all(all);
  std::string text;
  int n = 0;
  if (id && id < all.size()) {
    for (const auto &f : all[id]) {
      text += f.function + "\t" + f.file + "\t" + std::to_string(f.line) + "\n";
      ++n;
    }
  }
  if (static_cast<int>(text.size()) + 1 > cap) return -1;
  std::memcpy(buf, text.c_str(), text.size() + 1);
  return n;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int probe_capture(char *buf, int cap) {
  ensure_init();
  return write_frames(torchseal::py::capture(), buf, cap);
}

// The PyStackId of the current stack (0 = none), for identity checks.
__attribute__((visibility("default"))) unsigned probe_capture_id() {
  ensure_init();
  return torchseal::py::capture();
}

__attribute__((visibility("default"))) int probe_version(char *buf, int cap) {
  ensure_init();
  return std::snprintf(buf, static_cast<size_t>(cap), "%s", torchseal::py::version().c_str());
}

// Sleeps `pre_sleep_us` (so another thread can take the GIL), then captures
// `iters` times. Returns the slowest capture in ns; *first_id gets the id.
__attribute__((visibility("default"))) long long probe_capture_loop(int iters, int pre_sleep_us,
                                                                    unsigned *first_id) {
  ensure_init();
  if (pre_sleep_us > 0) {
    timespec ts{pre_sleep_us / 1000000, (pre_sleep_us % 1000000) * 1000L};
    nanosleep(&ts, nullptr);
  }
  uint64_t worst = 0;
  for (int i = 0; i < iters; ++i) {
    uint64_t t0 = now_ns();
    unsigned id = torchseal::py::capture();
    uint64_t dt = now_ns() - t0;
    if (i == 0 && first_id) *first_id = id;
    if (dt > worst) worst = dt;
  }
  return static_cast<long long>(worst);
}

// Benchmark: mean ns per capture over `iters` warm captures (after one
// warm-up capture that fills the caches); *cold_ns gets the first capture.
__attribute__((visibility("default"))) double probe_bench(int iters, double *cold_ns) {
  ensure_init();
  uint64_t t0 = now_ns();
  torchseal::py::capture();
  if (cold_ns) *cold_ns = static_cast<double>(now_ns() - t0);
  t0 = now_ns();
  for (int i = 0; i < iters; ++i) torchseal::py::capture();
  return static_cast<double>(now_ns() - t0) / iters;
}

}  // extern "C"
