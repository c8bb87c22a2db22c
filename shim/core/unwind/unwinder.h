// Native stack capture for the hot path.
//
// The fast walker steps frames with rules learned per return address from
// libunwind (frame_rules.h, rule_learner.h): a frame-pointer frame costs a
// table probe and two loads, any other frame one more add. A frame it cannot
// describe (signal trampoline, realigned stack, missing CFI) hands the whole
// capture to libunwind's unw_backtrace, which is also the only method with
// TORCHSEAL_UNWIND=libunwind. TORCHSEAL_UNWIND=check runs both on every
// capture and reports at exit how many stacks differed.
//
// libunwind is dlopen'ed RTLD_LOCAL at activation rather than linked: its
// shared object exports _Unwind_RaiseException and a weak backtrace(), and a
// preloaded link dependency would put those ahead of libgcc_s in the host's
// global scope and take over its C++ exceptions. Processes that never touch
// CUDA never load it at all.
#pragma once

#include <cstdint>
#include <string>

#include "common/settings/config.h"
#include "shim/core/unwind/address_ranges.h"

namespace torchseal {

// Loads the unwinder (libunwind: the copy bundled beside the shim, else the
// host's). Without it, stacks are walked by frame pointers alone, which
// stop at the first frame built without them; the process is then noted
// degraded and `*why` says what was tried. Returns a short description of
// the method in use.
const char *unwinder_init(UnwindMode mode, std::string *why = nullptr);

// Captures up to `max` return addresses, innermost first, with the frames
// inside torchseal itself removed. Returns the number stored.
int capture_stack(uint64_t *out, int max);

// Same, without the copy (the hot path): unwinds into `buf` (room for
// kCaptureBufFrames) and returns where the first non-torchseal frame is;
// `*n` gets the number of frames kept (at most `max`) and `*hash` their
// hash_ips() (ip_hash.h).
constexpr int kCaptureSlack = 12;  // our own frames, dropped
constexpr int kCaptureBufFrames = 256 + kCaptureSlack;
const uint64_t *capture_stack_inplace(uint64_t (&buf)[kCaptureBufFrames], int max, int *n,
                                      uint64_t *hash);

// The executable ranges of the loaded objects, sorted, and the loader's
// counts of loads and unloads when they were read.
struct CodeRanges {
  unsigned long long adds = 0, subs = 0;
  unwind::AddressRanges ranges;
};
// Taken before a dlclose; empty when no learned rules are in use.
CodeRanges unwinder_code_before_unload();
// Code was unmapped (dlclose): forget the rules learned for its addresses.
// With the ranges loaded before (`before`, not empty), only code that had
// rules costs the table: an unload of code no allocation's stack ever
// passed through (most plugins, every library that only ran its
// constructors) keeps it. The table can be replaced only so many times
// (frame_rules.h), after which stacks are walked by libunwind.
void unwinder_code_unloaded(const CodeRanges &before = CodeRanges{});
// Child side of fork.
void unwinder_after_fork();
// One line for the exit log: how stacks were walked (and, in check mode,
// how many differed from libunwind's).
void unwinder_log_summary();

}  // namespace torchseal
