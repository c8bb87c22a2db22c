// Native stack capture for the hot path.
//
// libunwind is dlopen'ed RTLD_LOCAL on first use rather than linked: its
// shared object exports _Unwind_RaiseException and a weak backtrace(), and a
// preloaded link dependency would put those ahead of libgcc_s in the host's
// global scope and take over its C++ exceptions. Processes that never touch
// CUDA never load it at all.
#pragma once

#include <cstdint>

namespace torchseal {

// Loads the unwinder; falls back to glibc backtrace() if libunwind is absent.
// Returns a short description of the method in use.
const char *unwinder_init();

// Captures up to `max` return addresses, innermost first, with the frames
// inside torchseal itself removed. Returns the number stored.
int capture_stack(uint64_t *out, int max);

// Same, without the copy (the hot path): unwinds into `buf` (room for
// kCaptureBufFrames) and returns where the first non-torchseal frame is;
// `*n` gets the number of frames kept (at most `max`).
constexpr int kCaptureSlack = 12;  // our own frames, dropped
constexpr int kCaptureBufFrames = 256 + kCaptureSlack;
const uint64_t *capture_stack_inplace(uint64_t (&buf)[kCaptureBufFrames], int max, int *n);

}  // namespace torchseal
