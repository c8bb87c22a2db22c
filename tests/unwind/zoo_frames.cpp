#include "zoo_frames.h"

#include <alloca.h>

#include <cstring>

namespace {
// Keeps the compiler from turning calls into jumps or folding frames.
volatile int g_sink;

__attribute__((noinline)) void big_frame(int depth, void (*leaf)(void *), void *arg);

__attribute__((noinline)) void small_frame(int depth, void (*leaf)(void *), void *arg) {
  if (depth <= 0) {
    leaf(arg);
  } else {
    big_frame(depth - 1, leaf, arg);
  }
  g_sink = g_sink + depth;
}

// A frame with a large, rsp-addressed local area and callee-saved spills.
__attribute__((noinline)) void big_frame(int depth, void (*leaf)(void *), void *arg) {
  char buf[1000];
  memset(buf, depth, sizeof buf);
  g_sink = buf[depth % 1000];
  if (depth <= 0) {
    leaf(arg);
  } else if (depth % 3 == 0) {
    zoo_alloca(static_cast<size_t>(depth) * 24, leaf, arg);
  } else {
    small_frame(depth - 1, leaf, arg);
  }
  g_sink = g_sink + buf[(depth * 7) % 1000];
}
}  // namespace

extern "C" {

void zoo_mixed(int depth, void (*leaf)(void *), void *arg) {
  small_frame(depth, leaf, arg);
  g_sink = g_sink + 1;
}

__attribute__((noinline)) void zoo_realigned(void (*leaf)(void *), void *arg) {
  alignas(64) char aligned[256];
  memset(aligned, 1, sizeof aligned);
  g_sink = aligned[reinterpret_cast<size_t>(&aligned) & 63];
  leaf(arg);
  g_sink = g_sink + aligned[7];
}

__attribute__((noinline)) void zoo_alloca(size_t bytes, void (*leaf)(void *), void *arg) {
  auto *p = static_cast<char *>(alloca(bytes + 1));
  memset(p, 2, bytes + 1);
  g_sink = p[bytes / 2];
  small_frame(0, leaf, arg);
  g_sink = g_sink + p[bytes];
}
}
